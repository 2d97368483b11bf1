#!/usr/bin/env bash
# `wcomm cluster launch` over the emulated cell (docs/wifi.md, "Collectives on the stations"):
# one rank on each station, launched over SSH like V0.1's cluster_benchmark, with Debian's sshd
# running in every station's namespace (generated keys, the launcher's `ssh` and `scp` given
# their config by a wrapper first in PATH). Runs the job once per algorithm in ALGORITHMS
# (wcomm's Group: auto; V0.1's ring: v01), prints p50 / p99 per collective and draws each
# report (OUT/cluster-ALGORITHM.html: completion per size, each rank's p50). Runs inside
# scripts/wifi-cell.sh; the launcher runs on the host behind the access point:
#   OUT=/tmp/cluster scripts/wifi-cell.sh --stations 4 --width 40 --mcs 7 -- bash apps/wifi_cell/cluster-study.sh
# Environment: CLI (default build/wcomm), OUT, SIZES (default 1048576), ROUNDS (default 10),
# COLLECTIVES (default broadcast,allgather,ring_allreduce), ALGORITHMS (default "auto v01"),
# COMPRESSION (the ranks' comm.compression, default off: V0.1 has none, and its payloads are
# zeros that zstd would shrink to nothing).
set -eu
n=$WIFI_CELL_STATIONS out=$(mkdir -p "${OUT:-.}" && cd "${OUT:-.}" && pwd) cli=$(realpath "${CLI:-build/wcomm}")
source "$(dirname "$0")/study-common.sh"  # mark, lag
tmp=$(mktemp -d /tmp/wifi-cluster.XXXXXX)
sshd_pids=()
cleanup() {
  for p in "${sshd_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ssh-keygen -q -t ed25519 -N "" -f "$tmp/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$tmp/id"
cp "$tmp/id.pub" "$tmp/authorized_keys"
mkdir -p /run/sshd "$tmp/bin"
: > "$tmp/known_hosts"; : > "$tmp/ssh_config"
nodes=""
for i in $(seq 1 "$n"); do
  ns_var=WIFI_CELL_STA_NS_$i addr_var=WIFI_CELL_STA_ADDR_$i
  ns=${!ns_var} addr=${!addr_var}
  echo "$addr $(cut -d' ' -f1-2 "$tmp/host_key.pub")" >> "$tmp/known_hosts"
  printf 'Host sta%s\n  HostName %s\n' "$i" "$addr" >> "$tmp/ssh_config"
  cat > "$tmp/sshd_$i.conf" <<CONF
ListenAddress $addr
Port 22
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/authorized_keys
PidFile $tmp/sshd_$i.pid
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
CONF
  ip netns exec "$ns" /usr/sbin/sshd -D -f "$tmp/sshd_$i.conf" -E "$tmp/sshd_$i.log" &
  sshd_pids+=($!)
  iface=$(ip -n "$ns" -o link show | awk -F': ' '$2 != "lo" {print $2; exit}')
  mkdir -p "$tmp/work-$i"
  nodes+="  - {node_id: sta$i, host: $addr, ranks: [$((i - 1))], ssh_alias: sta$i, interface: $iface, workdir: $tmp/work-$i, wcomm: $cli}
"
done
cat >> "$tmp/ssh_config" <<CONF
Host *
  User root
  IdentityFile $tmp/id
  IdentitiesOnly yes
  UserKnownHostsFile $tmp/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
CONF
for tool in ssh scp; do
  printf '#!/bin/sh\nexec /usr/bin/%s -F %s "$@"\n' "$tool" "$tmp/ssh_config" > "$tmp/bin/$tool"
  chmod +x "$tmp/bin/$tool"
done
# sshd listens once a connection from the host behind the access point gets through the air
for i in $(seq 1 "$n"); do
  addr_var=WIFI_CELL_STA_ADDR_$i
  for _ in $(seq 1 100); do
    ip netns exec "$WIFI_CELL_AP_NS" bash -c "exec 3<>/dev/tcp/${!addr_var}/22" 2>/dev/null && break
    sleep 0.1
  done
done
# The air's reference: one TCP stream station 1 -> station 2 (every byte crosses it twice,
# up to the access point and down again), as every collective's messages do here.
timeout 20 ip netns exec "$WIFI_CELL_STA_NS_2" iperf3 -s -1 -p 5299 > /dev/null &
server=$!
sleep 0.5
timeout 20 ip netns exec "$WIFI_CELL_STA_NS_1" iperf3 -c "$WIFI_CELL_STA_ADDR_2" -p 5299 -t 5 -J > "$out/iperf3-sta1-sta2.json"
wait "$server"  # (not the sshds)
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("iperf3 station 1 -> station 2: %.1f Mbit/s" % (r["end"]["sum_received"]["bits_per_second"]/1e6))' "$out/iperf3-sta1-sta2.json"
ring=$(seq -s, 0 $((n - 1)))
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $n ranks, one per station"
for algorithm in ${ALGORITHMS:-auto v01}; do
  cat > "$tmp/cluster-$algorithm.yaml" <<YAML
controller: sta1
base_port: 29500
nodes:
$nodes
ring: [$ring]
benchmark:
  payload_sizes: [${SIZES:-1048576}]
  rounds: ${ROUNDS:-10}
  warmup_rounds: 2
  collectives: [${COLLECTIVES:-broadcast,allgather,ring_allreduce}]
  timeout: 120
  algorithm: $algorithm
comm: {compression: ${COMPRESSION:-off}}
YAML
  m=$(mark)
  (cd "$tmp" && ip netns exec "$WIFI_CELL_AP_NS" env PATH="$tmp/bin:$PATH" "$cli" cluster launch \
    --config "$tmp/cluster-$algorithm.yaml" --output "$out/cluster-$algorithm.json" --timeout 600) > /dev/null
  python3 - "$out/cluster-$algorithm.json" "$algorithm" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for name, sizes in r["collective_summary"].items():
    for size, s in sizes.items():
        c = s["collective_completion_ms"]
        print("%s %s %s B: p50 %.1f ms, p99 %.1f ms (%d rounds)" % (sys.argv[2], name, size, c["p50"], c["p99"], c["sample_count"]))
PY
  lag "$m"
  "$cli" report "$out/cluster-$algorithm.json" -o "$out/cluster-$algorithm.html" --quiet  # its plots
done
