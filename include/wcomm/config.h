// Configuration: CommConfig (limits, queues, socket and egress settings) and the YAML node
// config of the V0.1 schema (local / peers / comm).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wcomm/address.h"

namespace wcomm {

// TLS for every connection (wcomm; docs/cpp-api.md, "TLS"): TLS 1.3 with mutual certificate
// checks. cert_file / key_file: this node's certificate chain and private key (PEM), whose
// subject CN or a DNS SAN is its node_id; ca_file: the CA certificates (PEM) a peer's
// certificate must chain to. All three, or none (TLS off).
struct TlsConfig {
  std::string cert_file = {};
  std::string key_file = {};
  std::string ca_file = {};
  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
  friend bool operator==(const TlsConfig&, const TlsConfig&) = default;
};

// Every limit and knob of a Comm. Field names and defaults are those of the V0.1 CommConfig.
struct CommConfig {
  // Codec limits, enforced on encode and decode (docs/wire-format.md).
  std::uint64_t max_message_bytes = 256ull << 20;  // whole frame: header + manifest + payload
  std::uint64_t max_manifest_bytes = 4ull << 20;
  std::uint64_t max_metadata_bytes = 64ull << 10;  // packed piggypayload
  std::uint64_t max_segments = 4096;
  std::uint64_t max_container_depth = 64;
  std::uint64_t max_container_nodes = 1'000'000;
  // Per-peer send queue bound (messages and bytes, the active message included).
  std::uint64_t max_peer_queued_messages = 1024;
  std::uint64_t max_peer_queued_bytes = 128ull << 20;
  // Per-peer bound on received but not yet recv()'d data; past it the connection is not
  // read until the application drains, so TCP pushes back on the sender.
  std::uint64_t max_peer_unreceived_messages = 4096;
  std::uint64_t max_peer_unreceived_bytes = 512ull << 20;
  // How long a dial is retried (with backoff) when the operation itself has no timeout.
  double connect_timeout_s = 30.0;
  bool allow_unsafe_pickle = false;
  bool tcp_nodelay = true;
  // The egress byte scheduler, with V0.1's keys and rules; 0 stands for V0.1's null (the
  // default of all three). A quantum turns it on: every peer's writer asks it for the next
  // bytes it may write, at most one quantum at a time, and it serves the peers in turn
  // (deficit round robin), so concurrent flows share the uplink fairly. With a rate, one token
  // bucket of egress_burst_bytes caps the whole node's egress (all peers together, as V0.1).
  // A rate or a burst needs a quantum, the burst must hold at least one quantum, and a rate
  // must be a whole number >= 1. V0.1's null burst means one quantum: the YAML loader and the
  // Python CommConfig fill that in; a C++ caller that sets a rate sets the burst too.
  std::uint64_t egress_quantum_bytes = 0;
  double egress_rate_bytes_per_second = 0.0;
  std::uint64_t egress_burst_bytes = 0;
  // With the scheduler on: at most this many peers receive bulk messages (CommOptions::priority
  // kBulk, or a large message by default) at once; the others' bulk waits for a flow to end,
  // while their small messages go on. 0: no cap (wcomm; V0.1 has no cap).
  std::uint64_t egress_max_bulk_flows = 0;
  // Chunked frames (wcomm; negotiated, a V0.1 peer never sees them): a message larger than
  // this is written in chunks of this many bytes, between which smaller or more urgent
  // messages to the same peer go out (CommOptions::priority). 0: never chunk. 4 KiB .. 64 MiB.
  // Over the same-host transports (shm, unix) a chunk is at least 16 MiB.
  std::uint64_t chunk_bytes = 256ull << 10;
  // TCP_NOTSENT_LOWAT on TCP connections: the kernel holds at most about this many unsent
  // bytes per connection, so a new urgent message waits behind little. Smaller is more
  // responsive; too small costs bulk goodput on fast, long links (more wake-ups, and the
  // kernel may run dry between writes). 0: the kernel's default (unbounded).
  std::uint64_t tcp_notsent_lowat_bytes = 128ull << 10;
  // SO_MAX_PACING_RATE on TCP connections (bytes per second; 0: unpaced): the kernel spaces
  // each connection's packets out at this rate (TCP's own pacing, no fq qdisc needed). On
  // Wi-Fi, a bulk stream paced just under the link's rate leaves the access point's queue
  // short, so a message behind it waits less (docs/wifi.md, "Pacing"). Per connection: the
  // rate is not shared across peers. At most 2^32 - 1.
  std::uint64_t tcp_max_pacing_rate_bytes_per_second = 0;
  // The queueing delay, in microseconds, that a TCP connection's own bytes may add on a path
  // that queues (0: no bound, the kernel's send buffer autotuning). Once the connection's
  // smoothed RTT passes its minimum by this much while it writes bulk, its send buffer (and
  // chunk size) follows what the path delivers in min RTT + this (bytes acknowledged over
  // time, from TCP_INFO): a Wi-Fi access point's queue stays short, and a message behind the
  // bulk waits about this long, with no rate to configure. On the emulated Wi-Fi cell the
  // default cut the loaded 64 B p99 from about 133 ms to 46-50 ms at 0.97-0.99x the goodput;
  // 2000-4000 cut it to 13-18 ms at 0.85-0.94x on one uplink, but cost stations that share
  // the air their goodput (docs/wifi.md, "Bounding the queue"). A path without a standing queue (loopback, a LAN)
  // never sees it, nor one whose bandwidth-delay product is past net.core.wmem_max. TLS
  // connections too. At most 1000000 (1 s).
  std::uint64_t tcp_target_queue_delay_us = 8000;
  // Adaptive compression of chunked messages over TCP (wcomm; negotiated as "zstd"): "auto"
  // compresses a message's chunks with zstd only when the link is measured slower than the
  // compressor and a first chunk shrinks (CommOptions::compress opts a message in or out);
  // "off" never compresses and does not offer it.
  std::string compression = "auto";
  // Busy polling: a thread blocked on a recv or recv_into without a timeout (get / wait /
  // wait_for) reads the socket without sleeping for up to this many microseconds before it
  // sleeps. A reply that comes within the window costs no sleep and wake-up (several
  // microseconds each way on a virtual machine); the price is up to this much CPU per recv
  // that has to wait. 0 sleeps at once.
  std::uint64_t recv_busy_poll_us = 20;
  // Sessions (wcomm; V0.1 has none of these). A connection to a wcomm peer that has carried
  // nothing for heartbeat_interval_s carries a heartbeat; a peer heard nothing from for three
  // intervals is declared dead and its connection failed (0: no heartbeats; a V0.1 peer gets
  // none). The accepting side closes a connection whose HELLO has not come within
  // handshake_timeout_s. After a connection fails, redials back off from
  // reconnect_backoff_initial_s, doubling (with jitter) up to reconnect_backoff_max_s.
  double heartbeat_interval_s = 2.0;
  double handshake_timeout_s = 10.0;
  double reconnect_backoff_initial_s = 0.01;
  double reconnect_backoff_max_s = 0.5;
  // At most this many accepted connections may wait for their handshake at once; one more
  // evicts the oldest (idle or hostile sockets cannot lock real peers out; wcomm).
  std::uint64_t max_pending_handshakes = 256;
  // And at most this many from one source address: one more evicts that source's oldest, so a
  // flood from one host cannot push out another host's handshakes (wcomm).
  std::uint64_t max_pending_handshakes_per_source = 32;
  // How peers are reached (wcomm): "auto" (shared memory with a peer on this host, else the
  // peer's addresses), "shm", "unix", "tcp" or "ucx" (only that; docs/cpp-api.md, "Transports";
  // ucx: the peers' ucx://host:port addresses, over UCX).
  // A peer's own `transport` overrides it.
  std::string transport = "auto";
  // Cluster key (wcomm): with one, every connection proves both ends know it (a mutual
  // HMAC-SHA256 challenge-response in the handshake) and peers without it are refused; at
  // least 16 bytes. Empty: no authentication, plain V0.1. YAML `comm.cluster_key_file`;
  // Comm::create reads WCOMM_CLUSTER_KEY_FILE when this is empty.
  std::string cluster_key = {};
  // TLS (wcomm), YAML `comm.tls: {cert_file, key_file, ca_file}`. With it, every connection is
  // TLS over TCP: `transport: auto` then never picks shared memory or Unix sockets for a peer
  // on this host (they would bypass TLS), and shm or unix are refused.
  TlsConfig tls = {};
  // Peers that join at run time (wcomm; docs/cpp-api.md, "Peers that join and leave at run
  // time"). With accept_unknown_peers, a HELLO from a node not in the directory adds it, at
  // the addresses its HELLO lists (a wcomm dialer's "listen=" features), once its handshake
  // (and cluster key proof, or TLS certificate) checks out; PeerEvent kJoined reports it.
  // It needs cluster_key or tls, so that an impostor cannot join; without either, Comm::create
  // refuses it unless allow_unauthenticated_joins is set and every local address is loopback
  // or a Unix / shm name (only processes on this host can then reach it). A join past
  // max_peers peers in the directory is refused (configured peers count too).
  bool accept_unknown_peers = false;
  bool allow_unauthenticated_joins = false;
  std::uint64_t max_peers = 1024;

  // Throws InvalidArgumentError naming the first field whose value is not acceptable.
  void validate() const;
};

// One node of the static peer directory. V0.1 names a node by host and port (TCP); a node
// may instead (or also) list addresses, tried in order when dialing and all listened on
// locally: tcp://host:port, unix:///path, unix://@name (wcomm/address.h).
struct Peer {
  std::string node_id;
  std::string host = {};
  std::uint16_t port = 0;
  std::vector<Address> addresses = {};
  std::string transport = {};  // "" (the Comm's CommConfig::transport), auto, shm, unix, tcp, ucx
  // Where the node is: tcp://host:port first when a host is given, then addresses.
  std::vector<Address> endpoints() const;
  std::string endpoints_text() const;  // "tcp://192.0.2.11:9000, unix:///tmp/b.sock"
  // The host it is reached at over the network (V0.1's host, else a tcp address's); "" for
  // a node reached only through Unix sockets (then there is no network path to diagnose).
  std::string network_host() const;
  // A node known only by where it listens (a joining node's HELLO, an agent's metadata): its
  // first tcp address becomes host and port (V0.1's, and what same-host names derive from).
  static Peer at(std::string node_id, std::vector<Address> addresses);
  friend bool operator==(const Peer&, const Peer&) = default;
};

// A node's whole configuration: what a YAML node config holds, and what Comm::create takes
// (comm.h calls it CommSpec).
struct NodeConfig {
  Peer local;                 // port 0: an ephemeral port (see Comm::port())
  std::vector<Peer> peers = {};  // every remote node this node may talk to
  std::string bind_host = {};    // empty: local.host
  CommConfig comm = {};
};

// Loads a YAML node config (V0.1 schema). Throws InvalidArgumentError whose message names the
// file and the offending key or value (unknown keys are rejected too).
NodeConfig load_node_config(const std::string& path);
NodeConfig parse_node_config(const std::string& yaml_text, const std::string& origin = "<string>");

// A cluster key file's bytes (a trailing newline dropped); InvalidArgumentError naming the
// file if it cannot be read or holds fewer than 16 bytes.
std::string read_cluster_key_file(const std::string& path);

}  // namespace wcomm
