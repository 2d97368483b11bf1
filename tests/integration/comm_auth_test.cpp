// Who gets in. Cluster-key authentication: keyed nodes talk; a wrong key, a missing key on
// either side, an impostor naming a real node, and a replayed exchange are refused, and the
// real peer keeps being served. Limits before the handshake: a huge HELLO, idle sockets.
#include <cstdlib>

#include "comm/cluster_auth.h"
#include "comm_fixture.h"
#include "process_util.h"
#include "wcomm/codec.h"

namespace wcomm::testing {
namespace {

const std::string kKey = "0123456789abcdef-cluster-key";

CommConfig keyed(std::string key = kKey) {
  CommConfig c;
  c.cluster_key = std::move(key);
  c.transport = "tcp";  // the raw clients below speak TCP
  return c;
}

// One control frame read from a raw client (header, then manifest).
Control read_control(RawClient& raw, FrameKind expected) {
  auto head = raw.read(kHeaderSize);
  if (head.size() != kHeaderSize) return {};
  auto header = parse_header(head.data(), CommConfig{});
  EXPECT_TRUE(header.ok());
  EXPECT_EQ(header.value().kind, expected);
  auto manifest = raw.read(header.value().manifest_size);
  auto control = decode_control(header.value(), manifest);
  return control ? control.value() : Control{};
}

// Reads (and drops) what the peer sends until it closes; false if it stays open.
bool closed_after_reading(RawClient& raw) {
  for (int i = 0; i < 1000; ++i)
    if (raw.closed_by_peer()) return true;
  return false;
}

std::string feature(const Control& c, const std::string& prefix) {
  for (const auto& f : c.features)
    if (f.rfind(prefix, 0) == 0) return f.substr(prefix.size());
  return "";
}

TEST(CommAuth, NodesWithTheSameKeyTalk) {
  auto p = make_pair(keyed(), keyed());
  wait_value(p.a->send(Value("hello"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("hello"));
  wait_value(p.b->send(Value("back"), p.b->peer("node-a")));
  EXPECT_EQ(wait_value(p.a->recv(p.a->peer("node-b"))).value, Value("back"));
  EXPECT_EQ(p.b->stats().connections_rejected, 0u);
}

TEST(CommAuth, AWrongKeyOrAMissingOneIsRefusedAtOnceAndBothSidesSayWhy) {
  struct Case {
    CommConfig a, b;
    const char* says;
  };
  CommConfig none;
  none.transport = "tcp";
  for (const Case& c : {Case{keyed(), keyed("another-key-of-16-bytes"), "proved a different cluster key"},
                        Case{keyed(), none, "did not prove the cluster key"},
                        Case{none, keyed(), "requires a cluster key and this node has none"}}) {
    auto p = make_pair(c.a, c.b);
    const auto start = std::chrono::steady_clock::now();
    auto r = wait_result(p.a->send(Value(1), p.a->peer("node-b")), 20s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kConnectionFailed);
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    EXPECT_LT(seconds_since(start), 2.0) << "a key mismatch is not retried until connect_timeout_s";
    for (int i = 0; i < 200 && p.b->stats().connections_rejected == 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_GE(p.b->stats().connections_rejected, 1u);
  }
}

TEST(CommAuth, AnImpostorNamingARealNodeIsRefusedAndTheRealOneKeepsWorking) {
  auto p = make_pair(keyed(), keyed());
  const Peer& a_at_b = p.b->peer("node-a");
  wait_value(p.a->send(Value("real 1"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(a_at_b)).value, Value("real 1"));
  auto waiting = p.b->recv(a_at_b, {.tag = 7});
  {
    // Knows node-a's name, not the key: V0.1's HELLO, then a forged message.
    RawClient raw(p.b->port());
    ASSERT_TRUE(raw.connected());
    raw.write(encode_control(FrameKind::kHello, {"node-a", "00000000000000000000000000000009", {}, {}}));
    raw.write(flatten(encode_data(Value("forged"), {}, 7, 1).value()));
    EXPECT_TRUE(closed_after_reading(raw));  // the HELLO_ACK, then the end
  }
  wait_value(p.a->send(Value("real 2"), p.a->peer("node-b"), {}, {.tag = 7}));
  EXPECT_EQ(wait_value(std::move(waiting)).value, Value("real 2")) << "the forged frame must never arrive";
  for (int i = 0; i < 200 && p.b->stats().connections_rejected == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(p.b->stats().connections_rejected, 1u);
}

TEST(CommAuth, AReplayedExchangeIsRefused) {
  auto p = make_pair(keyed(), keyed());
  const std::string id = "0000000000000000000000000000000a";
  const std::string nonce = auth::new_nonce();
  const std::vector<std::uint8_t> hello = encode_control(FrameKind::kHello, {"node-a", id, {"auth=" + nonce}, {}});
  std::vector<std::uint8_t> auth_frame;
  {
    // One honest exchange by a client that knows the key...
    RawClient raw(p.b->port());
    raw.write(hello);
    const std::string offered = feature(read_control(raw, FrameKind::kHelloAck), "auth=");
    ASSERT_NE(offered.find(':'), std::string::npos) << offered;
    auth::Exchange e{nonce, offered.substr(0, offered.find(':')), "node-a", "node-b", id};
    ASSERT_TRUE(auth::verify(kKey, "acceptor", e, offered.substr(offered.find(':') + 1)));
    auth_frame = encode_control(FrameKind::kAuth, {"node-a", id, {"proof=" + auth::proof(kKey, "dialer", e)}, {}});
    raw.write(auth_frame);
    raw.write(flatten(encode_data(Value("honest"), {}, 3, 1).value()));
    EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"), {.tag = 3})).value, Value("honest"));
  }
  const auto rejected = p.b->stats().connections_rejected;
  {
    // ...replayed byte for byte by someone who recorded it: the acceptor's nonce is new.
    RawClient raw(p.b->port());
    raw.write(hello);
    read_control(raw, FrameKind::kHelloAck);
    raw.write(auth_frame);
    raw.write(flatten(encode_data(Value("replayed"), {}, 3, 2).value()));
    EXPECT_TRUE(closed_after_reading(raw));
  }
  // (A ConnectionClosedError is the honest connection's end reaching this recv.)
  auto r = wait_result(p.b->recv(p.b->peer("node-a"), {.tag = 3, .timeout = 500ms}));
  EXPECT_FALSE(r.ok()) << "the replayed message arrived";
  for (int i = 0; i < 200 && p.b->stats().connections_rejected == rejected; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(p.b->stats().connections_rejected, rejected + 1);
}

TEST(CommAuth, TheKeyComesFromAFileOrTheEnvironmentAndMustBeLongEnough) {
  TempDir dir;
  const std::string file = dir.write("key", kKey + "\n");
  EXPECT_EQ(read_cluster_key_file(file), kKey);
  const std::string yaml = dir.write("a.yaml", "local: {node_id: a, host: 127.0.0.1, port: 0}\npeers: []\n"
                                               "comm: {cluster_key_file: " + file + "}\n");
  EXPECT_EQ(load_node_config(yaml).comm.cluster_key, kKey);
  const std::string short_key = dir.write("short", "tooshort\n");
  EXPECT_THROW(read_cluster_key_file(short_key), InvalidArgumentError);
  EXPECT_THROW(read_cluster_key_file(dir.path() / "missing"), InvalidArgumentError);
  CommConfig c;
  c.cluster_key = "tooshort";
  EXPECT_THROW(c.validate(), InvalidArgumentError);
  // WCOMM_CLUSTER_KEY_FILE keys a Comm whose config has none (node-b here), so it talks to node-a.
  ::setenv("WCOMM_CLUSTER_KEY_FILE", file.c_str(), 1);
  auto p = make_pair(keyed(), CommConfig{});
  ::unsetenv("WCOMM_CLUSTER_KEY_FILE");
  wait_value(p.a->send(Value("via env"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("via env"));
}

}  // namespace
}  // namespace wcomm::testing

namespace wcomm::testing {
namespace {

TEST(CommLimits, AHelloAnnouncingAHugeManifestIsDroppedBeforeAnythingIsAllocated) {
  CommConfig tcp;
  tcp.transport = "tcp";
  auto p = make_pair(tcp, tcp);
  FrameHeader h;
  h.kind = FrameKind::kHello;
  h.manifest_size = 4u << 20;  // under max_manifest_bytes, far over any handshake frame
  std::vector<std::uint8_t> header(kHeaderSize);
  write_header(h, header.data());
  RawClient raw(p.b->port());
  raw.write(header);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_LT(seconds_since(start), 2.0) << "not left waiting for 4 MiB";
  wait_value(p.a->send(Value("real"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("real"));
}

TEST(CommLimits, IdleSocketsBeyondMaxPendingHandshakesDoNotLockARealPeerOut) {
  CommConfig tcp;
  tcp.transport = "tcp";
  CommConfig guarded = tcp;
  guarded.max_pending_handshakes = 32;
  auto p = make_pair(tcp, guarded);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(std::make_unique<RawClient>(p.b->port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  // node-b accepted them all, kept the newest 32 and dropped the rest; node-a still gets in.
  for (int i = 0; i < 500 && p.b->stats().connections_rejected < 268; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(p.b->stats().connections_rejected, 268u);
  const auto start = std::chrono::steady_clock::now();
  wait_value(p.a->send(Value("real"), p.a->peer("node-b")), 10s);
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("real"));
  EXPECT_LT(seconds_since(start), 5.0);
}

}  // namespace
}  // namespace wcomm::testing
