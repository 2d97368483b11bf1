// Tests for CommConfig::validate and the YAML node config loader: the shipped configs, the
// defaults, and that every kind of bad input is refused with a message naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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
  EXPECT_EQ(a.local, (Peer{"node-a", "127.0.0.1", 19000}));
  EXPECT_EQ(b.local, (Peer{"node-b", "127.0.0.1", 19001}));
  EXPECT_EQ(a.bind_host, "127.0.0.1");
  ASSERT_EQ(a.peers.size(), 1u);
  ASSERT_EQ(b.peers.size(), 1u);
  EXPECT_EQ(a.peers[0], b.local);
  EXPECT_EQ(b.peers[0], a.local);
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
                                         "  egress_rate_bytes_per_second: 1e6\n"
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

TEST(ParseNodeConfig, EgressRateAcceptsNullAndIntegers) {
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  egress_rate_bytes_per_second: null\n")
                .comm.egress_rate_bytes_per_second,
            0.0);
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  egress_rate_bytes_per_second: ~\n")
                .comm.egress_rate_bytes_per_second,
            0.0);
  EXPECT_EQ(parse_node_config(kLocal + kPeers + "comm:\n  egress_rate_bytes_per_second: 125000000\n")
                .comm.egress_rate_bytes_per_second,
            125e6);
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

TEST(ParseNodeConfig, UnknownKeysAtEveryLevel) {
  EXPECT_HAS(parse_error(kLocal + kPeers + "extra: 1\n"), "configs/x.yaml: unknown key 'extra'");
  EXPECT_HAS(parse_error(kLocal + kPeers + "extra: 1\n"), "allowed keys: local, peers, comm");
  EXPECT_HAS(parse_error(kLocal + "  bind_hots: 0.0.0.0\n" + kPeers),
             "unknown key 'local.bind_hots' (did you mean bind_host?)");
  EXPECT_HAS(parse_error(kLocal + kPeers + "    bind_host: 0.0.0.0\n"),
             "unknown key 'peers[0].bind_host'");
  EXPECT_HAS(comm_error("  max_segment: 16\n"),
             "configs/x.yaml: unknown key 'comm.max_segment' (did you mean max_segments?)");
  EXPECT_HAS(parse_error("lcoal:\n  node_id: a\n" + kPeers), "unknown key 'lcoal' (did you mean local?)");
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
             "comm.egress_rate_bytes_per_second: expected a number, got 'fast'");
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

TEST(ParseNodeConfig, PeerDirectoryConsistency) {
  EXPECT_HAS(parse_error(kLocal + kPeers + "  - {node_id: node-b, host: 192.0.2.12, port: 9000}\n"),
             "peers[1].node_id: duplicate peer node_id 'node-b'");
  EXPECT_HAS(parse_error(kLocal + "peers: [{node_id: node-a, host: 192.0.2.12, port: 9000}]\n"),
             "peers[0].node_id: 'node-a' is the local node's own node_id");
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
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_quantum_bytes = 1023; }),
             "egress_quantum_bytes: must be between 1 KiB (1024) and 2^48");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_rate_bytes_per_second = -1; }),
             "egress_rate_bytes_per_second: must be a finite number >= 0 (0 = unlimited), got -1");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.egress_rate_bytes_per_second = std::nan(""); }),
             "egress_rate_bytes_per_second: must be");
  EXPECT_HAS(validate_error([](CommConfig& c) {
               c.egress_rate_bytes_per_second = 1e6;
               c.egress_burst_bytes = c.egress_quantum_bytes - 1;
             }),
             "egress_burst_bytes: must be at least egress_quantum_bytes (1048576) when "
             "egress_rate_bytes_per_second is set, got 1048575");
  EXPECT_HAS(validate_error([](CommConfig& c) { c.recv_busy_poll_us = 1'000'001; }),
             "recv_busy_poll_us: must be between 0 and 1000000 microseconds, got 1000001");
  // Without a rate the bucket is not used, so its size does not matter.
  CommConfig unlimited;
  unlimited.egress_burst_bytes = 0;
  EXPECT_NO_THROW(unlimited.validate());
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
