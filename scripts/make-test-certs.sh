#!/usr/bin/env bash
# Makes a test CA and one certificate per node with the openssl CLI, for comm.tls:
#   scripts/make-test-certs.sh DIR NODE_ID...
# writes DIR/ca.pem (the CA certificate: comm.tls.ca_file), DIR/ca.key, and for each node
# DIR/NODE_ID.pem (cert_file) and DIR/NODE_ID.key (key_file), whose subject CN and DNS
# subjectAltName are the node id. EC P-256 keys, valid for 30 days. For tests and trials: a
# real cluster keeps its CA key off the nodes.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NODE_ID..." >&2
  exit 2
fi
dir=$1
shift
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj "/CN=wcomm test CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
for node in "$@"; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$node" \
    -keyout "$dir/$node.key" -out "$dir/$node.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
    "$node" >"$dir/$node.ext"
  openssl x509 -req -in "$dir/$node.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
    -extfile "$dir/$node.ext" -out "$dir/$node.pem" 2>/dev/null
  rm -f "$dir/$node.csr" "$dir/$node.ext"
done
rm -f "$dir/ca.srl"
