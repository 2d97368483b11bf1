// Tests for CommConfig::validate and the YAML node config loader: the shipped configs, the
// defaults, and that every kind of bad input is refused with a message naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "wcomm/config.h"
#include "wcomm/errors.h"

namespace wcomm {
namespace {

const std::string kSourceDir = WCOMM_SOURCE_DIR;

// A valid minimal document; tests append or substitute to make one thing wrong at a time.
const std::string kLocal =
    "local:\n"
    "  node_id: node-a\n"
    "  host: 192.0.2.10\n"
    "  port: 9000\n";
const std::string kPeers =
    "peers:\n"
    "  - node_id: node-b\n"
    "    host: 192.0.2.11\n"
    "    port: 9000\n";

// The message of the InvalidArgumentError that `fn` throws ("" and a test failure if none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than InvalidArgumentError: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

std::string parse_error(const std::string& yaml) {
  return error_of([&] { parse_node_config(yaml, "configs/x.yaml"); });
}

std::string validate_error(const std::function<void(CommConfig&)>& change) {
  CommConfig c;
  change(c);
  return error_of([&] { c.validate(); });
}

std::string comm_error(const std::string& comm_body) {
  return parse_error(kLocal + kPeers + "comm:\n" + comm_body);
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) \
    << "message: " << (text) << "\nexpected to contain: " << (part)

// ---- shipped configs --------------------------------------------------------------------------

TEST(NodeConfigFiles, TwoNodePairLoads) {
  const NodeConfig a = load_node_config(kSourceDir + "/configs/node-a.yaml");
  const NodeConfig b = load_node_config(kSourceDir + "/configs/node-b.yaml");
  EXPECT_EQ(a.local, (Peer{"node-a", "192.0.2.10", 9000}));
  EXPECT_EQ(b.local, (Peer{"node-b", "192.0.2.11", 9000}));
  EXPECT_EQ(a.bind_host, "0.0.0.0");
  EXPECT_EQ(b.bind_host, "0.0.0.0");
  ASSERT_EQ(a.peers.size(), 1u);
  ASSERT_EQ(b.peers.size(), 1u);
  // Each lists the other exactly as the other describes itself.
  EXPECT_EQ(a.peers[0], b.local);
  EXPECT_EQ(b.peers[0], a.local);
  for (const NodeConfig* c : {&a, &b}) {
    EXPECT_EQ(c->comm.max_peer_queued_messages, 1024u);
    EXPECT_EQ(c->comm.max_peer_queued_bytes, 134217728u);
  }
}

TEST(NodeConfigFiles, LocalPairLoads) {
  const NodeConfig a = load_node_config(kSourceDir + "/configs/local-node-a.yaml");
  const NodeConfig b = load_node_config(kSourceDir + "/configs/local-node-b.yaml");
  // V0.1's example ports.
  EXPECT_EQ(a.local, (Peer{"node-a", "127.0.0.1", 9201}));
  EXPECT_EQ(b.local, (Peer{"node-b", "127.0.0.1", 9202}));
  EXPECT_EQ(a.bind_host, "127.0.0.1");
  ASSERT_EQ(a.peers.size(), 1u);
  ASSERT_EQ(b.peers.size(), 1u);
  EXPECT_EQ(a.peers[0], b.local);
  EXPECT_EQ(b.peers[0], a.local);
}

TEST(NodeConfigFiles, WifiPairLoads) {
  const NodeConfig thor = load_node_config(kSourceDir + "/configs/agx-thor-wifi.yaml");
  const NodeConfig orin = load_node_config(kSourceDir + "/configs/agx-orin-wifi.yaml");
  EXPECT_EQ(thor.local.node_id, "agx-thor");
  EXPECT_EQ(orin.local.node_id, "agx-orin");
  ASSERT_EQ(thor.peers.size(), 1u);
  ASSERT_EQ(orin.peers.size(), 1u);
  EXPECT_EQ(thor.peers[0], orin.local);
  EXPECT_EQ(orin.peers[0], thor.local);
}

// Every node config shipped in configs/ (the cluster topology is another schema) loads.
// (tests/python/test_v01_dropin.py checks that they hold only keys V0.1 knows.)
TEST(NodeConfigFiles, EveryShippedNodeConfigLoads) {
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir + "/configs")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name.rfind("cluster-", 0) == 0) continue;
    EXPECT_NO_THROW(load_node_config(entry.path().string())) << name;
    ++loaded;
  }
  EXPECT_GE(loaded, 6);
}

TEST(NodeConfigFiles, MissingFileNamesThePath) {
  const std::string path = kSourceDir + "/configs/does-not-exist.yaml";
  const std::string message = error_of([&] { load_node_config(path); });
  EXPECT_HAS(message, path);
  EXPECT_HAS(message, "not found");
}

TEST(NodeConfigFiles, DirectoryIsRefused) {
  EXPECT_HAS(error_of([&] { load_node_config(kSourceDir + "/configs"); }), "directory");
}

TEST(NodeConfigFiles, ErrorsFromAFileNameTheFile) {
  const std::string path = ::testing::TempDir() + "wcomm_config_test_bad.yaml";
  {
    std::ofstream out(path);
    out << kLocal << kPeers << "comm:\n  max_segments: abc\n";
  }
  const std::string message = error_of([&] { load_node_config(path); });
  std::remove(path.c_str());
  EXPECT_HAS(message, path + ": comm.max_segments: expected a positive integer, got 'abc'");
}

// ---- parsing: defaults and accepted forms -----------------------------------------------------

TEST(ParseNodeConfig, MinimalDocumentKeepsDefaults) {
  const NodeConfig c = parse_node_config(kLocal + kPeers);
  EXPECT_EQ(c.local, (Peer{"node-a", "192.0.2.10", 9000}));
  EXPECT_EQ(c.bind_host, "192.0.2.10");  // defaults to local.host
  ASSERT_EQ(c.peers.size(), 1u);
  EXPECT_EQ(c.peers[0], (Peer{"node-b", "192.0.2.11", 9000}));

  const CommConfig d;
  EXPECT_EQ(c.comm.max_message_bytes, d.max_message_bytes);
  EXPECT_EQ(c.comm.max_manifest_bytes, d.max_manifest_bytes);
  EXPECT_EQ(c.comm.max_metadata_bytes, d.max_metadata_bytes);
  EXPECT_EQ(c.comm.max_segments, d.max_segments);
  EXPECT_EQ(c.comm.max_peer_queued_messages, d.max_peer_queued_messages);
  EXPECT_EQ(c.comm.egress_rate_bytes_per_second, 0.0);
  EXPECT_EQ(c.comm.egress_quantum_bytes, 0u);  // V0.1's null: no pacing
  EXPECT_EQ(c.comm.egress_burst_bytes, 0u);
  EXPECT_TRUE(c.comm.tcp_nodelay);
  EXPECT_FALSE(c.comm.allow_unsafe_pickle);
}

TEST(ParseNodeConfig, DefaultsAreTheV01Values) {
  const CommConfig d;
  EXPECT_EQ(d.max_message_bytes, 256u << 20);
  EXPECT_EQ(d.max_manifest_bytes, 4u << 20);
  EXPECT_EQ(d.max_metadata_bytes, 64u << 10);
  EXPECT_EQ(d.max_segments, 4096u);
  EXPECT_EQ(d.max_container_depth, 64u);
  EXPECT_EQ(d.max_container_nodes, 1'000'000u);
  EXPECT_EQ(d.max_peer_queued_messages, 1024u);
  EXPECT_EQ(d.max_peer_queued_bytes, 128u << 20);
  EXPECT_FALSE(d.allow_unsafe_pickle);
  EXPECT_TRUE(d.tcp_nodelay);
  // egress_quantum_bytes, egress_rate_bytes_per_second and egress_burst_bytes: null (0).
  EXPECT_EQ(d.egress_quantum_bytes, 0u);
  EXPECT_EQ(d.egress_rate_bytes_per_second, 0.0);
  EXPECT_EQ(d.egress_burst_bytes, 0u);
  EXPECT_NO_THROW(d.validate());
}

TEST(ParseNodeConfig, EmptyPeersAndEmptyCommAreAccepted) {
  const NodeConfig c = parse_node_config(kLocal + "peers: []\ncomm:\n");
  EXPECT_TRUE(c.peers.empty());
  EXPECT_EQ(c.comm.max_segments, CommConfig{}.max_segments);
}

TEST(ParseNodeConfig, KeyOrderDoesNotMatter) {
  const NodeConfig c = parse_node_config(kPeers + "comm: {max_segments: 8}\n" + kLocal);
  EXPECT_EQ(c.local.node_id, "node-a");
  EXPECT_EQ(c.comm.max_segments, 8u);
}

TEST(ParseNodeConfig, LocalPortZeroMeansEphemeral) {
  const NodeConfig c = parse_node_config(
      "local: {node_id: a, host: 127.0.0.1, port: 0}\npeers: [{node_id: b, host: 127.0.0.1, port: 1}]\n");
  EXPECT_EQ(c.local.port, 0);
  EXPECT_EQ(c.peers[0].port, 1);
}

TEST(ParseNodeConfig, EveryCommFieldIsReadByItsName) {
  const NodeConfig c = parse_node_config(kLocal + kPeers +
                                         "comm:\n"
                                         "  max_message_bytes: 0x10000000\n"
                                         "  max_manifest_bytes: 2_097_152\n"
                                         "  max_metadata_bytes: 1024\n"
                                         "  max_segments: 16\n"
                                         "  max_container_depth: 8\n"
                                         "  max_container_nodes: 100\n"
                                         "  max_peer_queued_messages: 3\n"
                                         "  max_peer_queued_bytes: 4096\n"
                                         "  max_peer_unreceived_messages: 5\n"
                                         "  max_peer_unreceived_bytes: 8192\n"
                                         "  connect_timeout_s: 2.5\n"
                                         "  allow_unsafe_pickle: true\n"
                                         "  tcp_nodelay: false\n"
                                         "  egress_quantum_bytes: 65536\n"
                                         "  egress_rate_bytes_per_second: 1000000\n"
                                         "  egress_burst_bytes: 131072\n"
                                         "  recv_busy_poll_us: 0\n");
  const CommConfig& m = c.comm;
  EXPECT_EQ(m.max_message_bytes, 0x10000000u);
  EXPECT_EQ(m.max_manifest_bytes, 2097152u);
  EXPECT_EQ(m.max_metadata_bytes, 1024u);
  EXPECT_EQ(m.max_segments, 16u);
  EXPECT_EQ(m.max_container_depth, 8u);
  EXPECT_EQ(m.max_container_nodes, 100u);
  EXPECT_EQ(m.max_peer_queued_messages, 3u);
  EXPECT_EQ(m.max_peer_queued_bytes, 4096u);
  EXPECT_EQ(m.max_peer_unreceived_messages, 5u);
  EXPECT_EQ(m.max_peer_unreceived_bytes, 8192u);
  EXPECT_DOUBLE_EQ(m.connect_timeout_s, 2.5);
  EXPECT_TRUE(m.allow_unsafe_pickle);
  EXPECT_FALSE(m.tcp_nodelay);
  EXPECT_EQ(m.egress_quantum_bytes, 65536u);
  EXPECT_DOUBLE_EQ(m.egress_rate_bytes_per_second, 1e6);
  EXPECT_EQ(m.egress_burst_bytes, 131072u);
  EXPECT_EQ(m.recv_busy_poll_us, 0u);
}

TEST(ParseNodeConfig, EgressKeysAcceptNullAsV01) {
  for (const char* key : {"egress_quantum_bytes", "egress_burst_bytes", "egress_rate_bytes_per_second"}) {
    for (const char* null : {"null", "~", ""}) {
      const CommConfig c = parse_node_config(kLocal + kPeers + "comm:\n  " + key + ": " + null + "\n").comm;
      EXPECT_EQ(c.egress_quantum_bytes, 0u) << key;
      EXPECT_EQ(c.egress_burst_bytes, 0u) << key;
      EXPECT_EQ(c.egress_rate_bytes_per_second, 0.0) << key;
    }
  }
}

TEST(ParseNodeConfig, EgressNullBurstIsOneQuantum) {
  const CommConfig c = parse_node_config(kLocal + kPeers +
                                         "comm:\n  egress_quantum_bytes: 16\n  egress_rate_bytes_per_second: 2500000\n"
                                         "  egress_burst_bytes: null\n")
                           .comm;
  EXPECT_EQ(c.egress_quantum_bytes, 16u);  // V0.1's lower bound is 1 (its sweeps used 16)
  EXPECT_EQ(c.egress_burst_bytes, 16u);
  EXPECT_EQ(c.egress_rate_bytes_per_second, 2.5e6);
  // A quantum alone (V0.1's round-robin scheduler without a rate) is accepted too.
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  egress_quantum_bytes: 65536\n").comm.egress_quantum_bytes,
            65536u);
}

TEST(ParseNodeConfig, EgressRateAcceptsNullAndIntegers) {
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  egress_rate_bytes_per_second: null\n")
                .comm.egress_rate_bytes_per_second,
            0.0);
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  egress_rate_bytes_per_second: ~\n")
                .comm.egress_rate_bytes_per_second,
            0.0);
  const std::string quantum = "comm:\n  egress_quantum_bytes: 65536\n";
  EXPECT_EQ(parse_node_config(kLocal + kPeers + quantum + "  egress_rate_bytes_per_second: 125000000\n")
                .comm.egress_rate_bytes_per_second,
            125e6);
  // A whole number written as a float is the same rate.
  EXPECT_EQ(parse_node_config(kLocal + kPeers + quantum + "  egress_rate_bytes_per_second: 2500000.0\n")
                .comm.egress_rate_bytes_per_second,
            2.5e6);
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  connect_timeout_s: 5\n").comm.connect_timeout_s,
            5.0);
}

// ---- parsing: rejected input ------------------------------------------------------------------

TEST(ParseNodeConfig, InvalidYamlIsReported) {
  const std::string message = parse_error("local: [unclosed\n");
  EXPECT_HAS(message, "configs/x.yaml: ");
  EXPECT_HAS(message, "not valid YAML");
}

TEST(ParseNodeConfig, DocumentMustBeAMapping) {
  EXPECT_HAS(parse_error(""), "configs/x.yaml: expected a mapping");
  EXPECT_HAS(parse_error("- a\n- b\n"), "expected a mapping with keys local, peers, comm, got a list");
}

TEST(ParseNodeConfig, MissingRequiredKeys) {
  EXPECT_HAS(parse_error(kPeers), "configs/x.yaml: missing required key 'local'");
  EXPECT_HAS(parse_error(kLocal), "configs/x.yaml: missing required key 'peers'");
  EXPECT_HAS(parse_error("local: {host: h, port: 1}\n" + kPeers), "local: missing required key 'node_id'");
  EXPECT_HAS(parse_error("local: {node_id: a, port: 1}\n" + kPeers), "local: missing required key 'host'");
  EXPECT_HAS(parse_error("local: {node_id: a, host: h}\n" + kPeers), "local: missing required key 'port'");
  EXPECT_HAS(parse_error(kLocal + "peers:\n  - {node_id: b, host: h}\n"),
             "peers[0]: missing required key 'port'");
}

// V0.1's words ("unknown fields in <where>: <sorted names>") stay in the message, so scripts
// that match them keep working; a did-you-mean or the allowed keys follow.
TEST(ParseNodeConfig, UnknownKeysAtEveryLevel) {
  EXPECT_HAS(parse_error(kLocal + kPeers + "extra: 1\n"), "configs/x.yaml: unknown fields in configuration: extra");
  EXPECT_HAS(parse_error(kLocal + kPeers + "extra: 1\n"), "allowed keys: local, peers, comm");
  EXPECT_HAS(parse_error(kLocal + "  bind_hots: 0.0.0.0\n" + kPeers),
             "unknown fields in local: bind_hots (did you mean bind_host?)");
  EXPECT_HAS(parse_error(kLocal + kPeers + "    bind_host: 0.0.0.0\n"), "unknown fields in peers[0]: bind_host");
  EXPECT_HAS(comm_error("  max_segment: 16\n"),
             "configs/x.yaml: unknown fields in comm: max_segment (did you mean max_segments?)");
  EXPECT_HAS(parse_error("lcoal:\n  node_id: a\n" + kPeers),
             "unknown fields in configuration: lcoal (did you mean local?)");
  // Several at once: all of them, sorted, as V0.1 lists them.
  EXPECT_HAS(comm_error("  zeta: 1\n  alpha: 2\n  max_segments: 4\n"),
             "unknown fields in comm: alpha, zeta; allowed keys in comm: max_message_bytes");
}

TEST(ParseNodeConfig, DuplicateKeysAreRefused) {
  EXPECT_HAS(comm_error("  max_segments: 16\n  max_segments: 32\n"), "comm.max_segments: duplicate key");
}

TEST(ParseNodeConfig, WrongTypes) {
  EXPECT_HAS(comm_error("  max_segments: abc\n"),
             "configs/x.yaml: comm.max_segments: expected a positive integer, got 'abc'");
  EXPECT_HAS(comm_error("  max_segments: \"16\"\n"), "comm.max_segments: expected a positive integer, got '16'");
  EXPECT_HAS(comm_error("  max_segments: -1\n"), "comm.max_segments: expected a positive integer, got '-1'");
  EXPECT_HAS(comm_error("  max_segments: 1.5\n"), "comm.max_segments: expected a positive integer");
  EXPECT_HAS(comm_error("  max_segments: [1]\n"), "comm.max_segments: expected a positive integer, got a list");
  EXPECT_HAS(comm_error("  max_segments:\n"), "comm.max_segments: expected a positive integer, got null");
  EXPECT_HAS(comm_error("  max_message_bytes: 99999999999999999999999\n"),
             "comm.max_message_bytes: expected a positive integer");
  EXPECT_HAS(comm_error("  max_segments: 0755\n"), "comm.max_segments: expected a positive integer, got '0755'");
  EXPECT_HAS(comm_error("  tcp_nodelay: maybe\n"), "comm.tcp_nodelay: expected true or false, got 'maybe'");
  EXPECT_HAS(comm_error("  allow_unsafe_pickle: 1\n"), "comm.allow_unsafe_pickle: expected true or false");
  EXPECT_HAS(comm_error("  connect_timeout_s: soon\n"), "comm.connect_timeout_s: expected a number, got 'soon'");
  EXPECT_HAS(comm_error("  connect_timeout_s: .inf\n"), "comm.connect_timeout_s: expected a number");
  EXPECT_HAS(comm_error("  egress_rate_bytes_per_second: fast\n"),
             "comm.egress_rate_bytes_per_second: egress_rate_bytes_per_second must be positive when configured: "
             "expected a positive integer or null, got 'fast'");
  EXPECT_HAS(parse_error(kLocal + kPeers + "comm: [1, 2]\n"), "comm: expected a mapping");
  EXPECT_HAS(parse_error("local: node-a\n" + kPeers), "local: expected a mapping");
  EXPECT_HAS(parse_error(kLocal + "peers: {node_id: b}\n"), "peers: expected a list");
  EXPECT_HAS(parse_error(kLocal + "peers:\n"), "peers: expected a list of {node_id, host, port}, got null");
  EXPECT_HAS(parse_error(kLocal + "peers: [node-b]\n"), "peers[0]: expected a mapping");
  EXPECT_HAS(parse_error("local: {node_id: [a], host: h, port: 1}\n" + kPeers),
             "local.node_id: expected a non-empty string, got a list");
  EXPECT_HAS(parse_error("local: {node_id: a, host: {x: 1}, port: 1}\n" + kPeers),
             "local.host: expected a non-empty string, got a mapping");
  EXPECT_HAS(parse_error("local: {node_id: a, host: h, port: \"9000\"}\n" + kPeers),
             "local.port: expected a port number 0..65535, got '9000'");
}

TEST(ParseNodeConfig, EmptyNodeIdAndHost) {
  EXPECT_HAS(parse_error("local: {node_id: '', host: h, port: 1}\n" + kPeers),
             "local.node_id: expected a non-empty string, got ''");
  EXPECT_HAS(parse_error("local: {node_id:, host: h, port: 1}\n" + kPeers),
             "local.node_id: expected a non-empty string, got null");
  EXPECT_HAS(parse_error(kLocal + "peers: [{node_id: b, host: '', port: 1}]\n"),
             "peers[0].host: expected a non-empty string");
  EXPECT_HAS(parse_error("local: {node_id: a, host: h, port: 1, bind_host: ''}\n" + kPeers),
             "local.bind_host: expected a non-empty string");
}

TEST(ParseNodeConfig, PortRanges) {
  EXPECT_HAS(parse_error("local: {node_id: a, host: h, port: 65536}\n" + kPeers),
             "local.port: expected a port number 0..65535, got '65536'");
  EXPECT_HAS(parse_error("local: {node_id: a, host: h, port: -1}\n" + kPeers),
             "local.port: expected a port number 0..65535, got '-1'");
  EXPECT_HAS(parse_error(kLocal + "peers: [{node_id: b, host: h, port: 0}]\n"),
             "peers[0].port: expected a port number 1..65535, got '0'");
  EXPECT_HAS(parse_error(kLocal + "peers: [{node_id: b, host: h, port: 70000}]\n"),
             "peers[0].port: expected a port number 1..65535, got '70000'");
  EXPECT_EQ(parse_node_config("local: {node_id: a, host: h, port: 65535}\n" + kPeers).local.port, 65535);
}

TEST(ParseNodeConfig, BytesThatAreNotUtf8AreQuotedAsEscapes) {
  // The message quotes the file's bytes; Python shows a message only if it is valid UTF-8
  // (it raised ValueError('') for this one).
  EXPECT_HAS(parse_error("local: {node_id: node-a, host: h, port: \xff\xfe}\n" + kPeers),
             "local.port: expected a port number 0..65535, got '\\xff\\xfe'");
  EXPECT_HAS(parse_error("local: {node_id: n\xc3\xa9, host: h, port: 0x}\n" + kPeers), "local.port");
}

TEST(ParseNodeConfig, ANameWrittenAsANumberIsRefused) {
  // V0.1 wants node_id as a string; a host that is a bare number fails only at listen or dial.
  EXPECT_HAS(parse_error("local: {node_id: 123, host: 127.0.0.1, port: 9000}\n" + kPeers),
             "local.node_id: expected a string, got the number 123 (quote it if it is a name: '123')");
  EXPECT_HAS(parse_error(kLocal + "peers: [{node_id: node-b, host: 12345, port: 9000}]\n"),
             "peers[0].host: expected a string, got the number 12345");
  EXPECT_EQ(parse_node_config("local: {node_id: '123', host: 127.0.0.1, port: 9000}\n" + kPeers).local.node_id, "123");
}

TEST(ParseNodeConfig, PeerDirectoryConsistency) {
  EXPECT_HAS(parse_error(kLocal + kPeers + "  - {node_id: node-b, host: 192.0.2.12, port: 9000}\n"),
             "peers[1].node_id: duplicate node_id 'node-b'");
  EXPECT_HAS(parse_error(kLocal + "peers: [{node_id: node-a, host: 192.0.2.12, port: 9000}]\n"),
             "peers[0].node_id: duplicate node_id 'node-a': it is the local node's own node_id");
}

// Two nodes on one address: the node would dial itself. Port 0 (ephemeral) never clashes.
TEST(ParseNodeConfig, PeerOnTheLocalAddressIsRefused) {
  const std::string local = "local: {node_id: node-a, host: 127.0.0.1, port: 9201}\n";
  EXPECT_HAS(parse_error(local + "peers: [{node_id: node-b, host: 127.0.0.1, port: 9201}]\n"),
             "configs/x.yaml: peers[0]: 'node-b' has the same address as the local node 'node-a' "
             "(tcp://127.0.0.1:9201)");
  EXPECT_HAS(parse_error("local: {node_id: node-a, address: 'unix:///tmp/a.sock'}\n"
                         "peers: [{node_id: node-b, addresses: ['tcp://127.0.0.1:9202', 'unix:///tmp/a.sock']}]\n"),
             "peers[0]: 'node-b' has the same address as the local node 'node-a' (unix:///tmp/a.sock)");
  EXPECT_NO_THROW(parse_node_config(local + "peers: [{node_id: node-b, host: 127.0.0.1, port: 9202}]\n"));
  EXPECT_NO_THROW(parse_node_config(local + "peers: [{node_id: node-b, host: 192.0.2.11, port: 9201}]\n"));
  EXPECT_NO_THROW(parse_node_config("local: {node_id: a, host: 127.0.0.1, port: 0}\n"
                                    "peers: [{node_id: b, host: 127.0.0.1, port: 9201}]\n"));
}

// V0.1's egress rules, with its messages inside ours.
TEST(ParseNodeConfig, EgressAsV01ValidatesIt) {
  EXPECT_HAS(comm_error("  egress_rate_bytes_per_second: 2500000\n"),
             "configs/x.yaml: comm.egress_rate_bytes_per_second: egress pacing requires egress_quantum_bytes");
  EXPECT_HAS(comm_error("  egress_burst_bytes: 65536\n"),
             "comm.egress_burst_bytes: egress burst requires egress_quantum_bytes");
  EXPECT_HAS(comm_error("  egress_quantum_bytes: 65536\n  egress_burst_bytes: 1024\n"),
             "comm.egress_burst_bytes: egress burst must be at least one quantum (egress_quantum_bytes=65536), "
             "got 1024");
  for (const char* key : {"egress_quantum_bytes", "egress_burst_bytes", "egress_rate_bytes_per_second"}) {
    for (const char* bad : {"0", "-5", "'7'", "[1]"})
      EXPECT_HAS(comm_error(std::string("  ") + key + ": " + bad + "\n"),
                 "comm." + std::string(key) + ": " + key + " must be positive when configured")
          << key << " = " << bad;
  }
  // Integers only, as V0.1's scheduler checks them; a rate may be a whole float.
  EXPECT_HAS(comm_error("  egress_quantum_bytes: 65536.0\n"), "egress_quantum_bytes must be positive when configured");
  EXPECT_HAS(comm_error("  egress_quantum_bytes: 16\n  egress_rate_bytes_per_second: 0.5\n"),
             "egress_rate_bytes_per_second must be positive when configured");
  EXPECT_HAS(comm_error("  egress_quantum_bytes: 16\n  egress_rate_bytes_per_second: 1000.5\n"),
             "egress_rate_bytes_per_second must be positive when configured");
  EXPECT_HAS(comm_error("  egress_quantum_bytes: 16\n  egress_rate_bytes_per_second: .inf\n"),
             "egress_rate_bytes_per_second must be positive when configured");
}

TEST(ParseNodeConfig, ErrorsCarryALineNumber) {
  EXPECT_HAS(comm_error("  max_segments: abc\n"), "(line 10)");
}

TEST(ParseNodeConfig, ValidateRunsAtTheEnd) {
  EXPECT_HAS(comm_error("  max_segments: 0\n"),
             "configs/x.yaml: comm.max_segments: must be between 1 and 2^20 (1048576), got 0 (line 10)");
  EXPECT_HAS(comm_error("  max_metadata_bytes: 8388608\n"),
             "comm.max_metadata_bytes: must be between 1 and max_manifest_bytes (4194304), got 8388608");
  EXPECT_HAS(comm_error("  max_manifest_bytes: 1024\n  max_message_bytes: 1024\n"),
             "comm.max_manifest_bytes: must be less than max_message_bytes (1024), got 1024");
  EXPECT_HAS(comm_error("  connect_timeout_s: 0\n"), "comm.connect_timeout_s: must be a finite number of seconds > 0");
}

// ---- CommConfig::validate ---------------------------------------------------------------------

TEST(CommConfigValidate, DefaultsAndBoundariesPass) {
  EXPECT_NO_THROW(CommConfig{}.validate());
  CommConfig c;
  c.max_segments = 1u << 20;
  c.max_container_depth = 4096;
  c.egress_quantum_bytes = 1024;
  c.egress_rate_bytes_per_second = 1e6;
  c.egress_burst_bytes = 1024;
  c.max_metadata_bytes = c.max_manifest_bytes;
  EXPECT_NO_THROW(c.validate());
  c.recv_busy_poll_us = 1'000'000;
  EXPECT_NO_THROW(c.validate());
  c.max_container_depth = 1;
  c.max_segments = 1;
  c.recv_busy_poll_us = 0;
  EXPECT_NO_THROW(c.validate());
}

TEST(CommConfigValidate, ZeroLimitsAreRefused) {
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_message_bytes = 0; }),
             "CommConfig.max_message_bytes: must be between 1 and 2^48");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_metadata_bytes = 0; }), "max_metadata_bytes: must be between 1");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_container_nodes = 0; }),
             "max_container_nodes: must be a positive integer, got 0");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_peer_queued_messages = 0; }),
             "max_peer_queued_messages: must be a positive integer, got 0");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_peer_queued_bytes = 0; }), "max_peer_queued_bytes: must be");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_peer_unreceived_messages = 0; }),
             "max_peer_unreceived_messages: must be a positive integer");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_peer_unreceived_bytes = 0; }),
             "max_peer_unreceived_bytes: must be");
}

TEST(CommConfigValidate, CodecLimitOrdering) {
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_metadata_bytes = c.max_manifest_bytes + 1; }),
             "max_metadata_bytes: must be between 1 and max_manifest_bytes (4194304), got 4194305");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_manifest_bytes = c.max_message_bytes; }),
             "max_manifest_bytes: must be less than max_message_bytes");
  EXPECT_HAS(validate_error([](CommConfig& c) {
               c.max_message_bytes = 1ull << 40;
               c.max_manifest_bytes = 1ull << 32;
             }),
             "max_manifest_bytes: must be between 1 and 2^32-1");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_message_bytes = (1ull << 48) + 1; }),
             "max_message_bytes: must be between 1 and 2^48");
}

TEST(CommConfigValidate, SegmentAndDepthRanges) {
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_segments = (1u << 20) + 1; }),
             "max_segments: must be between 1 and 2^20 (1048576), got 1048577");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_segments = 0; }), "max_segments: must be between 1");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_container_depth = 0; }),
             "max_container_depth: must be between 1 and 4096, got 0");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.max_container_depth = 4097; }),
             "max_container_depth: must be between 1 and 4096, got 4097");
}

TEST(CommConfigValidate, Timeouts) {
  EXPECT_HAS(validate_error([](CommConfig& c) { c.connect_timeout_s = 0; }),
             "CommConfig.connect_timeout_s: must be a finite number of seconds > 0, got 0");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.connect_timeout_s = -1; }), "connect_timeout_s: must be");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.connect_timeout_s = std::nan(""); }), "connect_timeout_s: must be");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.connect_timeout_s = std::numeric_limits<double>::infinity(); }),
             "connect_timeout_s: must be");
}

TEST(CommConfigValidate, Egress) {
  // 0 is V0.1's null for all three; a quantum of 1 byte is V0.1's lower bound.
  CommConfig paced;
  paced.egress_quantum_bytes = 1;
  paced.egress_rate_bytes_per_second = 1;
  paced.egress_burst_bytes = 1;
  EXPECT_NO_THROW(paced.validate());
  CommConfig quantum_only;
  quantum_only.egress_quantum_bytes = 16;
  EXPECT_NO_THROW(quantum_only.validate());

  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_rate_bytes_per_second = 1e6; }),
             "CommConfig.egress_rate_bytes_per_second: egress pacing requires egress_quantum_bytes");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_burst_bytes = 4096; }),
             "CommConfig.egress_burst_bytes: egress burst requires egress_quantum_bytes");
  EXPECT_HAS(validate_error([](CommConfig& c) {
               c.egress_quantum_bytes = 65536;
               c.egress_burst_bytes = 65535;
             }),
             "egress_burst_bytes: egress burst must be at least one quantum (egress_quantum_bytes=65536), got 65535");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_rate_bytes_per_second = -1; }),
             "egress_rate_bytes_per_second: egress_rate_bytes_per_second must be positive when configured");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_rate_bytes_per_second = 0.5; }),
             "egress_rate_bytes_per_second must be positive when configured");
  EXPECT_HAS(validate_error([](CommConfig& c) {
               c.egress_quantum_bytes = 1024;
               c.egress_rate_bytes_per_second = 1000.5;
             }),
             "egress_rate_bytes_per_second must be positive when configured");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_rate_bytes_per_second = std::nan(""); }),
             "egress_rate_bytes_per_second: ");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_quantum_bytes = (1ull << 48) + 1; }),
             "egress_quantum_bytes: must be at most 2^48");
  // A rate with a quantum and no burst is fine: the burst is one quantum, as in V0.1.
  CommConfig rate_without_burst;
  rate_without_burst.egress_quantum_bytes = 1024;
  rate_without_burst.egress_rate_bytes_per_second = 1e6;
  EXPECT_NO_THROW(rate_without_burst.validate());
  EXPECT_HAS(validate_error([](CommConfig& c) { c.recv_busy_poll_us = 1'000'001; }),
             "recv_busy_poll_us: must be between 0 and 1000000 microseconds, got 1000001");
}

TEST(CommConfigValidate, ThrowsTheTypedError) {
  CommConfig c;
  c.max_segments = 0;
  try {
    c.validate();
    FAIL() << "did not throw";
  } catch (const CommError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace wcomm

namespace wcomm {
namespace {

TEST(ParseNodeConfig, TransportForTheCommAndPerPeer) {
  EXPECT_EQ(parse_node_config(kLocal + kPeers).comm.transport, "auto");
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  transport: shm\n").comm.transport, "shm");
  const NodeConfig c = parse_node_config(kLocal + kPeers + "    transport: tcp\n");
  EXPECT_EQ(c.peers.at(0).transport, "tcp");
  EXPECT_HAS(comm_error("  transport: udp\n"), "comm.transport");
  EXPECT_HAS(comm_error("  transport: udp\n"), "must be one of auto, shm, unix, tcp, ucx, got 'udp'");
  EXPECT_HAS(parse_error(kLocal + kPeers + "    transport: udp\n"), "expected one of auto, shm, unix, tcp, ucx, got 'udp'");
  EXPECT_HAS(parse_error(kLocal + "  transport: tcp\n" + kPeers), "unknown fields in local: transport");
}

}  // namespace
}  // namespace wcomm

namespace wcomm {
namespace {

TEST(ParseNodeConfig, CommTlsNamesTheThreeFiles) {
  const NodeConfig c = parse_node_config(kLocal + kPeers +
                                         "comm:\n  tls: {cert_file: a.pem, key_file: a.key, ca_file: ca.pem}\n");
  EXPECT_EQ(c.comm.tls, (TlsConfig{"a.pem", "a.key", "ca.pem"}));
  EXPECT_TRUE(c.comm.tls.enabled());
  EXPECT_FALSE(parse_node_config(kLocal + kPeers).comm.tls.enabled());
}

TEST(ParseNodeConfig, CommTlsMistakesAreNamed) {
  EXPECT_HAS(comm_error("  tls: {cert_file: a.pem, ca_file: ca.pem}\n"), "comm.tls.key_file");
  EXPECT_HAS(comm_error("  tls: {cert_file: a.pem, key_file: a.key, ca_file: ca.pem, pass: x}\n"), "pass");
  EXPECT_HAS(comm_error("  transport: shm\n  tls: {cert_file: a.pem, key_file: a.key, ca_file: ca.pem}\n"),
             "bypass TLS");
}

}  // namespace
}  // namespace wcomm
