// Comm over the ucx transport between two processes (`wcomm node echo` as the peer): tensors
// up to 64 MiB both ways, stats that name the transport, and a killed peer's end as a typed
// error. The conformance suite runs the rest (transport_conformance_test.cpp).
#include <atomic>
#include <thread>

#include "comm_fixture.h"
#include "process_util.h"

namespace wcomm::testing {
namespace {

// node-b as a process that echoes every message on tag 1 back, reached only at ucx:// addresses.
class UcxEchoPeer {
 public:
  UcxEchoPeer() : ports_(free_tcp_ports(2)) {
    config_ = dir_.write("node-b.yaml",
                         "local: {node_id: node-b, addresses: [" + url(1) + "]}\n"
                         "peers: [{node_id: node-a, addresses: [" + url(0) + "]}]\n"
                         "comm: {transport: ucx, max_message_bytes: 268435456}\n");
  }
  void start() {
    process_ = Process::spawn({WCOMM_CLI, "node", "--config", config_, "echo", "--src", "node-a", "--tag", "1",
                               "--count", "0", "--timeout", "60"},
                              dir_.path(), "ucx-echo");
  }
  Process& process() { return process_; }
  Peer a() const { return {"node-a", "", 0, {Address::parse(url(0))}, "ucx"}; }
  Peer b() const { return {"node-b", "", 0, {Address::parse(url(1))}, "ucx"}; }

 private:
  std::string url(int i) const { return "ucx://127.0.0.1:" + std::to_string(ports_[i]); }
  TempDir dir_;
  std::vector<std::uint16_t> ports_;
  std::string config_;
  Process process_;
};

// Default heartbeats (2 s): a killed peer is seen through UCX's endpoint error, and a loaded
// machine's 64 MiB echo is not mistaken for a dead peer.
CommConfig ucx_big_messages() {
  CommConfig c;
  c.max_message_bytes = c.max_peer_queued_bytes = 256ull << 20;
  return c;
}

// A round trip through the echo process (retried while it starts: it may not listen yet, and
// a sanitizer build on a loaded machine took longer than one send's dialing, 2 s).
Value echo(Comm& comm, const Peer& b, const Value& v) {
  for (int attempt = 0;; ++attempt) {
    auto sent = wait_result(comm.send(v, b, {}, {.tag = 1}), std::chrono::seconds(30));
    if (sent.ok()) break;
    if (attempt >= 10 || sent.error().code != ErrorCode::kConnectionFailed) throw std::runtime_error(sent.error().message);
  }
  return wait_value(comm.recv(b, {.tag = 1, .timeout = 20s}), std::chrono::seconds(30)).value;
}

TEST(CommUcx, TensorsUpTo64MiBMakeTheRoundTripAndStatsNameUcx) {
  UcxEchoPeer peer;
  peer.start();
  auto a = Comm::create({peer.a(), {peer.b()}, "", ucx_big_messages()});
  const Peer& b = a->peer("node-b");
  EXPECT_EQ(echo(*a, b, Value("hello")), Value("hello"));
  for (std::int64_t elements : {1ll, 1000ll, 16ll << 20}) {  // the last is 64 MiB of int32
    Tensor t = Tensor::empty(DType::kInt32, {elements});
    for (std::int64_t i = 0; i < elements; ++i) t.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(i * 2654435761u);
    EXPECT_EQ(echo(*a, b, Dict{{"t", t}}).as<Dict>().items.at(0).second.as<Tensor>(), t) << elements;
  }
  const auto stats = a->stats();
  ASSERT_EQ(stats.peers.count("node-b"), 1u);
  EXPECT_EQ(stats.peers.at("node-b").transport, "ucx");
}

TEST(CommUcx, AKilledPeerFailsAWaitingRecvWithATypedErrorAndIsReachedAgainAfterItsRestart) {
  UcxEchoPeer peer;
  peer.start();
  auto a = Comm::create({peer.a(), {peer.b()}, "", ucx_big_messages()});
  const Peer& b = a->peer("node-b");
  EXPECT_EQ(echo(*a, b, Value(1)), Value(1));
  auto waiting = a->recv(b, {.tag = 2});  // no timeout: only the peer's end can end it
  ASSERT_TRUE(peer.process().kill().has_value());
  auto r = wait_result(std::move(waiting), 15s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConnectionClosed) << r.error().message;
  peer.start();  // the same address, a new incarnation
  EXPECT_EQ(echo(*a, b, Value(2)), Value(2));
}

TEST(CommUcx, ANodeClosedWhileItsPeerKeepsDialingItDoesNotCrashAndRestartsAtItsAddress) {
  // UCX 1.13 handed a connection accepted just before its listener was destroyed to the
  // destroyed listener (a use after free: this crashed in about half of the runs). A closed
  // listener now refuses requests for a while first; a node restarting at its address in this
  // process takes it over.
  const auto ports = free_tcp_ports(2);
  const auto url = [&](int i) { return "ucx://127.0.0.1:" + std::to_string(ports[i]); };
  const Peer a_peer{"node-a", "", 0, {Address::parse(url(0))}, "ucx"};
  const Peer b_peer{"node-b", "", 0, {Address::parse(url(1))}, "ucx"};
  auto b = Comm::create({b_peer, {a_peer}});
  std::atomic<bool> stop{false};
  std::thread dialer([&] {  // b keeps (re)connecting to a, every attempt short
    while (!stop.load()) (void)wait_result(b->send(Value("knock"), b->peer("node-a"), {}, {.timeout = Seconds(0.05)}), 5s);
  });
  for (int round = 0; round < 20; ++round) {
    auto a = Comm::create({a_peer, {b_peer}});  // the same address each round
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 7));
    a->close();
  }
  stop.store(true);
  dialer.join();
  // Both restart at their addresses (taking over their retired listeners) and talk.
  b->close();
  auto a = Comm::create({a_peer, {b_peer}});
  b = Comm::create({b_peer, {a_peer}});
  wait_value(b->send(Value("again"), b->peer("node-a"), {}, {.tag = 9}), 20s);
  EXPECT_EQ(wait_value(a->recv(a->peer("node-b"), {.tag = 9}), 20s).value, Value("again"));
}

TEST(CommUcx, TransportUcxWithoutAUcxAddressIsRefusedAtCreate) {
  const std::uint16_t port = ReservedPort().port();
  Peer b{"node-b", "127.0.0.1", port};
  b.transport = "ucx";
  try {
    Comm::create({{"node-a", "", 0, {Address::parse("ucx://127.0.0.1:" + std::to_string(ReservedPort().port()))}},
                  {b}});
    FAIL() << "created";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no address for transport 'ucx'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wcomm::testing
