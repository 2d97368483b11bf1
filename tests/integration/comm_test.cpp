// Comm on real loopback sockets: directory, send/recv, connection reuse, tags, records,
// simultaneous dials, timeouts, backpressure, cancellation, broken and hostile peers.
#include <time.h>

#include <future>
#include <thread>

#include "comm_fixture.h"
#include "wcomm/codec.h"

namespace wcomm::testing {
namespace {

TEST(CommDirectory, PeerLookup) {
  auto p = make_pair();
  EXPECT_EQ(p.a->peer("node-b"), p.peer_b);
  EXPECT_THROW(p.a->peer("node-x"), std::out_of_range);
  EXPECT_THROW(p.a->peer("node-a"), std::out_of_range);  // the local node is not a peer
  ASSERT_EQ(p.a->peers().size(), 1u);
  EXPECT_EQ(p.a->peers()[0].node_id, "node-b");
}

TEST(CommDirectory, BadSpecsRejected) {
  Peer self{"n", "127.0.0.1", 0};
  EXPECT_THROW(Comm::create({self, {{"n", "127.0.0.1", 1}}, "", {}}), InvalidArgumentError);
  EXPECT_THROW(Comm::create({self, {{"x", "127.0.0.1", 1}, {"x", "127.0.0.1", 2}}, "", {}}), InvalidArgumentError);
  CommConfig bad;
  bad.max_segments = 0;
  EXPECT_THROW(Comm::create({self, {}, "", bad}), InvalidArgumentError);
}

TEST(CommDirectory, HelloFromUnknownNodeIsRejected) {
  auto p = make_pair();
  RawClient raw(p.b->port());
  ASSERT_TRUE(raw.connected());
  raw.write(encode_control(FrameKind::kHello, {"intruder", "0123456789abcdef0123456789abcdef", {}}));
  EXPECT_TRUE(raw.closed_by_peer());
  // The Comm still serves its real peer.
  wait_value(p.a->send(Value("hi"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("hi"));
  EXPECT_EQ(p.b->stats().connections_rejected, 1u);
}

TEST(CommSendRecv, ValueAndPiggypayload) {
  auto p = make_pair();
  Dict piggy{{"trace_id", "request-42"}, {"hops", List{1, 2}}};
  auto sent = wait_value(p.a->send(Dict{{"message", "hello"}, {"n", 7}}, p.a->peer("node-b"), piggy, {.tag = 1}));
  EXPECT_EQ(sent.message_id, 1u);
  EXPECT_GT(sent.wire_bytes, kHeaderSize);
  auto got = wait_value(p.b->recv(p.b->peer("node-a"), {.tag = 1}));
  EXPECT_EQ(got.value, (Value(Dict{{"message", "hello"}, {"n", 7}})));
  EXPECT_EQ(got.piggypayload, Value(piggy));
  EXPECT_EQ(got.wire_bytes, sent.wire_bytes);
}

TEST(CommSendRecv, StatsCountTheRecvsWaitingOnAPeer) {
  auto p = make_pair();
  const Peer& a = p.b->peer("node-a");
  EXPECT_EQ(p.b->stats().peers.at("node-a").recvs_waiting, 0u);
  auto first = p.b->recv(a, {.tag = 1});
  auto second = p.b->recv(a, {.tag = 2});
  EXPECT_EQ(p.b->stats().peers.at("node-a").recvs_waiting, 2u);
  wait_value(p.a->send(Value(1), p.a->peer("node-b"), {}, {.tag = 1}));
  wait_value(std::move(first));
  EXPECT_EQ(p.b->stats().peers.at("node-a").recvs_waiting, 1u);
  second.cancel();
  EXPECT_FALSE(wait_result(std::move(second)).ok());
  EXPECT_EQ(p.b->stats().peers.at("node-a").recvs_waiting, 0u);
}

TEST(CommSendRecv, OneConnectionReusedInBothDirections) {
  auto p = make_pair();
  for (int i = 0; i < 5; ++i) {
    wait_value(p.a->send(Value(i), p.a->peer("node-b")));
    EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(i));
    wait_value(p.b->send(Value(-i), p.b->peer("node-a")));
    EXPECT_EQ(wait_value(p.a->recv(p.a->peer("node-b"))).value, Value(-i));
  }
  auto sa = p.a->stats(), sb = p.b->stats();
  EXPECT_EQ(sa.connections_dialed + sa.connections_accepted, 1u);
  EXPECT_EQ(sb.connections_dialed + sb.connections_accepted, 1u);
}

TEST(CommSendRecv, TagFilterKeepsOtherMessagesInOrder) {
  auto p = make_pair();
  const Peer& b = p.a->peer("node-b");
  for (int i = 0; i < 3; ++i) {
    wait_value(p.a->send(Value(i), b, {}, {.tag = 1}));
    wait_value(p.a->send(Value(100 + i), b, {}, {.tag = 2}));
  }
  const Peer& a = p.b->peer("node-a");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wait_value(p.b->recv(a, {.tag = 2})).value, Value(100 + i));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wait_value(p.b->recv(a, {.tag = 1})).value, Value(i));
}

TEST(CommSendRecv, RegisteredRecordType) {
  auto p = make_pair();
  Record record{"tests.Record", 1, {{"sequence", 9}, {"label", "message"}}};
  // Unregistered on the sender: refused before anything is queued.
  auto refused = wait_result(p.a->send(record, p.a->peer("node-b")));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnknownCodec);
  p.a->register_record("tests.Record", 1);
  p.b->register_record("tests.Record", 1);
  wait_value(p.a->send(record, p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(record));
}

TEST(CommSendRecv, SimultaneousFirstSendsConverge) {
  for (int round = 0; round < 5; ++round) {
    auto p = make_pair();
    auto fa = p.a->send(Value("from a"), p.a->peer("node-b"));
    auto fb = p.b->send(Value("from b"), p.b->peer("node-a"));
    wait_value(std::move(fa));
    wait_value(std::move(fb));
    EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("from a"));
    EXPECT_EQ(wait_value(p.a->recv(p.a->peer("node-b"))).value, Value("from b"));
    // Later traffic in order, both ways, whichever connection each side settled on.
    for (int i = 0; i < 20; ++i) wait_value(p.a->send(Value(i), p.a->peer("node-b")));
    for (int i = 0; i < 20; ++i) EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(i));
  }
}

TEST(CommSendRecv, RecvTimeoutLosesNothing) {
  auto p = make_pair();
  auto timed_out = wait_result(p.b->recv(p.b->peer("node-a"), {.tag = 3, .timeout = 0.1s}));
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.error().code, ErrorCode::kOperationTimeout);
  EXPECT_THROW(p.b->recv(p.b->peer("node-a"), {.tag = 3, .timeout = 0.05s}).get(), OperationTimeoutError);
  wait_value(p.a->send(Value("late"), p.a->peer("node-b"), {}, {.tag = 3}));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"), {.tag = 3})).value, Value("late"));
}

TEST(CommSendRecv, CancelledRecvLosesNothing) {
  auto p = make_pair();
  auto pending = p.b->recv(p.b->peer("node-a"), {.tag = 4});
  pending.cancel();
  auto r = wait_result(std::move(pending));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled);
  wait_value(p.a->send(Value(1), p.a->peer("node-b"), {}, {.tag = 4}));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"), {.tag = 4})).value, Value(1));
}

TEST(CommSendRecv, TensorDictZeroCopy) {
  auto p = make_pair();
  Tensor t = Tensor::empty(DType::kFloat32, {3, 64, 64});
  for (std::size_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = float(i) * 0.5f;
  Tensor flags = Tensor::zeros(DType::kBool, {5});
  Value msg = Dict{{"tensor", t}, {"flags", flags}, {"name", "batch-1"}};
  wait_value(p.a->send(msg, p.a->peer("node-b"), Dict{{"step", 3}}));
  auto got = wait_value(p.b->recv(p.b->peer("node-a")));
  EXPECT_EQ(got.value, msg);
  const Tensor& rt = got.value.as<Dict>().find("tensor")->as<Tensor>();
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(rt.data()) % kBufferAlignment, 0u);
  EXPECT_EQ(p.a->stats().bytes_copied + p.b->stats().bytes_copied, 0u);
}

TEST(CommSendRecv, LargeFrameStartedOnCallerThreadFinishesFirstInOrder) {
  // An idle peer's send is written on the caller's thread; a frame larger than the socket
  // buffers is finished by the loop before the messages sent after it.
  auto p = make_pair();
  const Peer& b = p.a->peer("node-b");
  wait_value(p.a->send(Value("warm-up"), b));  // connection up, peer idle
  Tensor big = Tensor::empty(DType::kInt32, {8 << 20});  // 32 MiB
  for (std::size_t i = 0; i < big.numel(); ++i) big.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(i);
  auto f1 = p.a->send(big, b);
  auto f2 = p.a->send(Value("after"), b);
  wait_value(std::move(f1));
  wait_value(std::move(f2));
  const Peer& a = p.b->peer("node-a");
  EXPECT_EQ(wait_value(p.b->recv(a)).value, Value("warm-up"));
  EXPECT_EQ(wait_value(p.b->recv(a)).value, Value(big));
  EXPECT_EQ(wait_value(p.b->recv(a)).value, Value("after"));
}

TEST(CommSendRecv, ConcurrentSendersKeepEachThreadsOrder) {
  auto p = make_pair();
  const Peer& b = p.a->peer("node-b");
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) p.a->send(List{t, i}, b, {}, {.tag = 9}).get();
    });
  std::vector<int> next(kThreads, 0);
  for (int n = 0; n < kThreads * kEach; ++n) {
    auto got = wait_value(p.b->recv(p.b->peer("node-a"), {.tag = 9}));
    const auto& items = got.value.as<List>().items;
    int t = static_cast<int>(items[0].as<std::int64_t>());
    EXPECT_EQ(items[1], Value(next[t]));
    next[t] += 1;
  }
  for (auto& th : threads) th.join();
}

TEST(CommSendRecv, RecvIntoCallerTensors) {
  auto p = make_pair();
  Tensor src = Tensor::empty(DType::kInt32, {1000});
  for (int i = 0; i < 1000; ++i) src.data_as<std::int32_t>()[i] = i;
  Tensor dst = Tensor::zeros(DType::kInt32, {1000});
  auto pending = p.b->recv_into(p.b->peer("node-a"), {dst}, {.tag = 5});
  wait_value(p.a->send(List{src}, p.a->peer("node-b"), {}, {.tag = 5}));
  auto got = wait_value(std::move(pending));
  EXPECT_EQ(got.value.as<List>().items[0].as<Tensor>().data(), dst.data());
  EXPECT_EQ(dst, src);
  // A mismatching destination fails that recv with a reason.
  Tensor wrong = Tensor::zeros(DType::kFloat32, {1000});
  auto mismatched = p.b->recv_into(p.b->peer("node-a"), {wrong}, {.tag = 5});
  wait_value(p.a->send(List{src}, p.a->peer("node-b"), {}, {.tag = 5}));
  auto r = wait_result(std::move(mismatched));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupportedPayload);
}

TEST(CommBackpressure, FailFastAndWaitForCapacity) {
  CommConfig small;
  small.max_peer_queued_messages = 2;
  small.connect_timeout_s = 10;
  // node-b does not exist yet: sends queue up while node-a retries its dial.
  ReservedPort port_a, port_b;
  Peer peer_a{"node-a", "127.0.0.1", port_a.port()}, peer_b{"node-b", "127.0.0.1", port_b.port()};
  auto a = Comm::create({peer_a, {peer_b}, "127.0.0.1", small});
  auto f1 = a->send(Value(1), a->peer("node-b"));
  auto f2 = a->send(Value(2), a->peer("node-b"));
  auto full = wait_result(a->send(Value(3), a->peer("node-b"), {}, {.wait_for_capacity = false}));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kBackpressure);
  EXPECT_NE(full.error().message.find("max_peer_queued_messages=2"), std::string::npos);
  auto f4 = a->send(Value(4), a->peer("node-b"));  // waits for capacity
  EXPECT_EQ(f4.wait_for(50ms), nullptr);
  auto b = Comm::create({peer_b, {peer_a}, "127.0.0.1", {}});  // start order does not matter
  wait_value(std::move(f1));
  wait_value(std::move(f2));
  wait_value(std::move(f4));
  for (int expected : {1, 2, 4}) EXPECT_EQ(wait_value(b->recv(b->peer("node-a"))).value, Value(expected));
}

TEST(CommBackpressure, MessageLargerThanQueueBoundRejected) {
  CommConfig small;
  small.max_peer_queued_bytes = 1 << 20;
  auto p = make_pair(small);
  auto r = wait_result(p.a->send(Tensor::zeros(DType::kUInt8, {2 << 20}), p.a->peer("node-b")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMessageTooLarge);
  EXPECT_NE(r.error().message.find("max_peer_queued_bytes"), std::string::npos);
}

TEST(CommBackpressure, TimeoutCancelsActiveSendAndReleasesCapacity) {
  CommConfig sender;
  sender.max_peer_queued_messages = 2;
  CommConfig receiver;
  receiver.max_peer_unreceived_messages = 1;  // stops reading after one unreceived message
  auto p = make_pair(sender, receiver);
  const Peer& b = p.a->peer("node-b");
  wait_value(p.a->send(Value("fills the receiver's inbox"), b));
  Tensor big = Tensor::zeros(DType::kUInt8, {64 << 20});  // far more than the socket buffers
  auto stuck = p.a->send(big, b, {}, {.timeout = 0.3s});
  auto r = wait_result(std::move(stuck));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kOperationTimeout);
  // Capacity is back: two fail-fast sends are admitted (they go out on a fresh connection).
  auto f1 = p.a->send(Value("after-1"), b, {}, {.wait_for_capacity = false});
  auto f2 = p.a->send(Value("after-2"), b, {}, {.wait_for_capacity = false});
  EXPECT_TRUE(wait_result(std::move(f1)).ok());
  EXPECT_TRUE(wait_result(std::move(f2)).ok());
}

TEST(CommBackpressure, CancelQueuedSendRemovesIt) {
  CommConfig config;
  config.max_peer_queued_messages = 1;
  ReservedPort port_a, port_b;
  Peer peer_a{"node-a", "127.0.0.1", port_a.port()}, peer_b{"node-b", "127.0.0.1", port_b.port()};
  auto a = Comm::create({peer_a, {peer_b}, "127.0.0.1", config});
  auto queued = a->send(Value("never"), a->peer("node-b"));  // nobody listens yet
  queued.cancel();
  auto r = wait_result(std::move(queued));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled);
  auto next = a->send(Value("next"), a->peer("node-b"), {}, {.wait_for_capacity = false});
  auto b = Comm::create({peer_b, {peer_a}, "127.0.0.1", {}});
  wait_value(std::move(next));
  EXPECT_EQ(wait_value(b->recv(b->peer("node-a"))).value, Value("next"));
}

TEST(CommFailures, UnreachablePeerFailsWithConnectionFailed) {
  CommConfig config;
  config.connect_timeout_s = 0.3;
  ReservedPort port_a, port_ghost;  // nobody ever listens on the ghost's port
  Peer peer_a{"node-a", "127.0.0.1", port_a.port()}, ghost{"ghost", "127.0.0.1", port_ghost.port()};
  auto a = Comm::create({peer_a, {ghost}, "127.0.0.1", config});
  auto r = wait_result(a->send(Value(1), a->peer("ghost")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConnectionFailed);
  EXPECT_NE(r.error().message.find("ghost"), std::string::npos);
}

TEST(CommFailures, PeerClosingMidFrameFailsEveryWaiter) {
  auto p = make_pair();
  const Peer& a_seen_by_b = p.b->peer("node-a");
  auto w1 = p.b->recv(a_seen_by_b, {.tag = 1});
  auto w2 = p.b->recv(a_seen_by_b, {.tag = 2});
  {
    RawClient raw(p.b->port());  // pretends to be node-a
    ASSERT_TRUE(raw.connected());
    raw.write(encode_control(FrameKind::kHello, {"node-a", "00000000000000000000000000000001", {}}));
    ASSERT_EQ(raw.read(119).size(), 119u);  // HELLO_ACK
    auto frame = flatten(encode_data(Tensor::zeros(DType::kFloat32, {1024}), {}, 1, 1).value());
    frame.resize(frame.size() / 2);
    raw.write(frame);
  }  // closes mid-frame
  for (auto* w : {&w1, &w2}) {
    auto r = wait_result(std::move(*w));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kConnectionClosed);
    EXPECT_NE(r.error().message.find("mid-frame"), std::string::npos) << r.error().message;
  }
  // The peer comes back and is served again.
  wait_value(p.a->send(Value("back"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(a_seen_by_b)).value, Value("back"));
}

TEST(CommFailures, RefusedFrameWithNobodyWaitingIsReportedToTheNextRecv) {
  auto p = make_pair();
  p.a->register_record("only.on.a", 1);
  wait_value(p.a->send(Record{"only.on.a", 1, {{"x", 1}}}, p.a->peer("node-b")));
  // node-b refuses the frame (unknown type) and drops the connection; no recv was waiting.
  auto r = wait_result(p.b->recv(p.b->peer("node-a"), {.timeout = 5s}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownCodec);
  EXPECT_NE(r.error().message.find("only.on.a"), std::string::npos) << r.error().message;
  // Reported once; the peers talk again afterwards (node-b dials a fresh connection).
  EXPECT_EQ(wait_result(p.b->recv(p.b->peer("node-a"), {.timeout = 0.1s})).error().code, ErrorCode::kOperationTimeout);
  wait_value(p.b->send(Value("next"), p.b->peer("node-a")));
  EXPECT_EQ(wait_value(p.a->recv(p.a->peer("node-b"))).value, Value("next"));
}

TEST(CommFailures, GarbageIsRejectedWhileOtherPeersAreServed) {
  auto p = make_pair();
  RawClient raw(p.b->port());
  ASSERT_TRUE(raw.connected());
  raw.write(std::vector<std::uint8_t>(64, 0xAB));
  EXPECT_TRUE(raw.closed_by_peer());
  for (int i = 0; i < 3; ++i) {
    wait_value(p.a->send(Value(i), p.a->peer("node-b")));
    EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(i));
  }
  EXPECT_EQ(p.b->stats().connections_rejected, 1u);
}

TEST(CommFailures, CloseFailsPendingOperations) {
  auto p = make_pair();
  auto pending = p.b->recv(p.b->peer("node-a"));
  p.b->close();
  auto r = wait_result(std::move(pending));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kClosed);
  EXPECT_THROW(p.b->send(Value(1), p.b->peer("node-a")).get(), ClosedError);
}

TEST(CommFailures, InboundBoundPushesBackUntilDrained) {
  CommConfig receiver;
  receiver.max_peer_unreceived_messages = 4;
  auto p = make_pair({}, receiver);
  std::vector<Future<SendResult>> sends;
  for (int i = 0; i < 50; ++i) sends.push_back(p.a->send(Value(i), p.a->peer("node-b")));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(i));
  for (auto& f : sends) wait_value(std::move(f));
}

TEST(CommFailures, PausedConnectionIdlesWithoutSpinning) {
  CommConfig receiver;
  receiver.max_peer_unreceived_messages = 2;
  auto p = make_pair({}, receiver);
  std::vector<Future<SendResult>> sends;
  for (int i = 0; i < 200; ++i) sends.push_back(p.a->send(Value(std::string(1000, 'x')), p.a->peer("node-b")));
  std::this_thread::sleep_for(100ms);  // node-b's inbox fills; the rest waits in the socket
  // Paused with bytes waiting: no thread may spin on them (a spin would burn ~300 ms here).
  timespec before{}, after{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before);
  std::this_thread::sleep_for(300ms);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &after);
  const double cpu_s = double(after.tv_sec - before.tv_sec) + double(after.tv_nsec - before.tv_nsec) * 1e-9;
  EXPECT_LT(cpu_s, 0.1) << "CPU used while paused";
  for (int i = 0; i < 200; ++i) EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(std::string(1000, 'x')));
  for (auto& f : sends) wait_value(std::move(f));
}

TEST(CommEgress, RateLimitPacesWrites) {
  CommConfig paced;
  paced.egress_rate_bytes_per_second = 4 << 20;  // 4 MiB/s
  paced.egress_quantum_bytes = 64 << 10;
  paced.egress_burst_bytes = 64 << 10;
  auto p = make_pair(paced);
  Tensor t = Tensor::zeros(DType::kUInt8, {2 << 20});
  auto start = std::chrono::steady_clock::now();
  wait_value(p.a->send(t, p.a->peer("node-b")));
  auto got = wait_value(p.b->recv(p.b->peer("node-a")));
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(got.value, Value(t));
  EXPECT_GE(elapsed, 0.4);  // 2 MiB at 4 MiB/s cannot take less than ~0.5 s
}

TEST(CommCallbacks, ThenRunsOnceOffTheCallingThread) {
  auto p = make_pair();
  std::promise<std::thread::id> where;
  p.b->recv(p.b->peer("node-a")).then([&](Result<Received> r) { where.set_value(std::this_thread::get_id()); });
  wait_value(p.a->send(Value(1), p.a->peer("node-b")));
  auto f = where.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

// A send the caller's thread writes whole returns a Future that is complete already: its
// callback still runs once, off the calling thread; cancelling it changes nothing; the
// message ids keep counting up, and the peer gets every message in order.
TEST(CommCallbacks, ASendWrittenWholeByItsCallerIsCompleteAtOnce) {
  auto p = make_pair();
  const Peer& b = p.a->peer("node-b");
  wait_value(p.a->send(Value(0), b));  // dials; later sends find the connection idle
  wait_value(p.b->recv(p.b->peer("node-a")));
  std::optional<Future<SendResult>> complete;
  std::uint64_t last_id = 0;
  int sent = 1;
  for (int i = 0; i < 200 && !complete; ++i) {  // (the loop hands the idle connection over)
    auto f = p.a->send(Value(sent++), b);
    if (f.ready()) complete = f;
    const auto id = wait_value(f).message_id;
    EXPECT_GT(id, last_id);
    last_id = id;
    if (!complete) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(complete.has_value()) << "no send was written whole by its caller";
  complete->cancel();
  EXPECT_EQ(wait_value(*complete).message_id, last_id);
  std::promise<std::thread::id> where;
  complete->then([&](Result<SendResult> r) {
    EXPECT_TRUE(r.ok());
    where.set_value(std::this_thread::get_id());
  });
  auto ran = where.get_future();
  ASSERT_EQ(ran.wait_for(5s), std::future_status::ready);
  EXPECT_NE(ran.get(), std::this_thread::get_id());
  for (int i = 1; i < sent; ++i) EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(i));
}

}  // namespace
}  // namespace wcomm::testing
