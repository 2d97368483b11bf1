// Delivery semantics at the edges (docs/cpp-api.md, "Delivery semantics"): a send reported
// failed was not delivered; one that went out whole before its cancel, timeout or close is
// reported sent; an acked send whose acknowledgement never came says the peer may have it.
#include <gtest/gtest.h>

#include <cmath>

#include "comm_fixture.h"
#include "wcomm/codec.h"

namespace wcomm::testing {
namespace {

// 8 KiB: above the sender's chunk_bytes (4 KiB), so the send goes through the loop (a
// caller's thread writes only what would not be chunked); over unix the connection's own
// chunks are 16 MiB, so the loop writes the frame whole in one call, and the kernel takes it
// at once. The transport posts the write's completion: whatever the loop runs next comes
// between the frame's last byte leaving and its send completing.
Value eight_kib(int i) { return Value(Bytes(std::string(8192, static_cast<char>('a' + i)))); }

Pair unix_pair_that_sends_through_the_loop() {
  CommConfig b;
  b.chunk_bytes = 4096;
  auto p = connected_pair(b, "unix");
  // node-b sends (chunk_bytes is the sender's): a recv on node-a sees what arrived.
  return p;
}

// Whether node-a received the message numbered i on tag 1 (it waits a little for it).
bool received(Pair& p, int i) {
  auto r = wait_result(p.a->recv(p.a->peer("node-b"), {.tag = 1, .timeout = 1s}));
  if (!r.ok()) return false;
  EXPECT_EQ(r.value().value, eight_kib(i));
  return true;
}

TEST(CommDelivery, ACancelThatCameAfterTheFrameWentOutWholeLeavesTheSendDelivered) {
  auto p = unix_pair_that_sends_through_the_loop();
  // The cancel is posted to the loop after the send: it runs once the frame is in the kernel,
  // before the write's completion. Without the hand-over count it aborted the connection and
  // failed the send, and node-a received the message anyway.
  auto sent = p.b->send(eight_kib(1), p.b->peer("node-a"), {}, {.tag = 1});
  sent.cancel();
  auto r = wait_result(std::move(sent));
  EXPECT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(received(p, 1));
  EXPECT_EQ(p.b->stats().connections_dialed + p.b->stats().connections_accepted, 1u) << "the connection was kept";
}

TEST(CommDelivery, ACloseThatCameAfterTheFrameWentOutWholeLeavesTheSendDelivered) {
  auto p = unix_pair_that_sends_through_the_loop();
  auto sent = p.b->send(eight_kib(2), p.b->peer("node-a"), {}, {.tag = 1});
  p.b->close();  // posted behind the send, as the cancel above
  auto r = wait_result(std::move(sent));
  EXPECT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(received(p, 2));
}

TEST(CommDelivery, ASendCancelledBeforeItsFrameWentOutIsNotDelivered) {
  auto p = unix_pair_that_sends_through_the_loop();
  // A send queued behind a 64 MiB one on the same tag is still queued when its cancel runs.
  const Value big(Tensor::zeros(DType::kUInt8, {64ll << 20}));
  auto first = p.b->send(big, p.b->peer("node-a"), {}, {.tag = 1});
  auto second = p.b->send(eight_kib(3), p.b->peer("node-a"), {}, {.tag = 1});
  second.cancel();
  auto r = wait_result(std::move(second));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled);
  EXPECT_TRUE(wait_result(std::move(first)).ok());
  auto got = wait_result(p.a->recv(p.a->peer("node-b"), {.tag = 1, .timeout = 10s}));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_FALSE(received(p, 3)) << "a send reported cancelled was delivered";
}

// Whatever a cancel's moment, over tcp with chunks (a cancel between chunks ends the
// connection and the receiver drops the partial message): reported sent exactly when
// delivered, for each of a series of sends cancelled at once.
TEST(CommDelivery, OverTcpWithChunksACancelledSendIsDeliveredExactlyWhenReportedSent) {
  CommConfig b;
  b.chunk_bytes = 4096;
  auto p = connected_pair(b, "tcp");
  for (int i = 0; i < 8; ++i) {
    auto sent = p.b->send(eight_kib(i), p.b->peer("node-a"), {}, {.tag = 1});
    sent.cancel();
    auto r = wait_result(std::move(sent));
    if (!r.ok()) EXPECT_EQ(r.error().code, ErrorCode::kCancelled) << r.error().message;
    EXPECT_EQ(received(p, i), r.ok()) << "send " << i << ": " << (r.ok() ? "sent" : r.error().message);
  }
}

// CommOptions::retry_key: retrying after an unknown outcome is safe. The repeat of a message
// delivered with a key is acknowledged (the retry completes) and never delivered again, while
// it still waits unreceived and after it was received; other keys go through.
class CommRetryKey : public ::testing::TestWithParam<const char*> {};

TEST_P(CommRetryKey, ARepeatOfADeliveredMessageIsAcknowledgedAndNotDeliveredAgain) {
  auto p = connected_pair({}, GetParam());
  const Peer& b = p.a->peer("node-b");
  const Peer& a = p.b->peer("node-a");
  ASSERT_TRUE(wait_result(p.a->send(Value("first"), b, {}, {.tag = 3, .ack = true, .retry_key = 42})).ok());
  // The retry: its outcome is "delivered" (acknowledged), the message is not there twice.
  auto retry = wait_result(p.a->send(Value("first, again"), b, {}, {.tag = 3, .ack = true, .retry_key = 42}));
  ASSERT_TRUE(retry.ok()) << retry.error().message;
  ASSERT_TRUE(wait_result(p.a->send(Value("second"), b, {}, {.tag = 3, .retry_key = 43})).ok());
  EXPECT_EQ(wait_value(p.b->recv(a, {.tag = 3})).value, Value("first"));
  EXPECT_EQ(wait_value(p.b->recv(a, {.tag = 3})).value, Value("second"));
  // Once received, a repeat is still dropped (without ack: nothing waits for it).
  ASSERT_TRUE(wait_result(p.a->send(Value("second, again"), b, {}, {.tag = 3, .retry_key = 43})).ok());
  ASSERT_TRUE(wait_result(p.a->send(Value("third"), b, {}, {.tag = 3})).ok());
  EXPECT_EQ(wait_value(p.b->recv(a, {.tag = 3})).value, Value("third"));
  EXPECT_EQ(p.b->stats().duplicates_dropped, 2u);
}

TEST_P(CommRetryKey, ARecvIntoGetsAKeyedMessageByACopy) {
  auto p = connected_pair({}, GetParam());
  std::vector<std::int32_t> values{1, 2, 3, 4}, into(4);
  auto got = p.b->recv_into(p.b->peer("node-a"), {Tensor::borrow(into.data(), DType::kInt32, {4})}, {.tag = 4});
  ASSERT_TRUE(wait_result(p.a->send(Value(Tensor::borrow(values.data(), DType::kInt32, {4})), p.a->peer("node-b"), {},
                                    {.tag = 4, .retry_key = 7}))
                  .ok());
  ASSERT_TRUE(wait_result(std::move(got)).ok());
  EXPECT_EQ(into, values);
}

INSTANTIATE_TEST_SUITE_P(Transports, CommRetryKey, ::testing::Values("tcp", "unix", "shm"),
                         [](const auto& info) { return std::string(info.param); });

TEST(CommRetryKeyV01, AV01PeerCannotHonourARetryKeyAndTheSendSaysSo) {
  auto p = make_pair();
  RawClient raw(p.b->port());  // a V0.1 "node-a": no features
  ASSERT_TRUE(raw.connected());
  raw.write(encode_control(FrameKind::kHello, {"node-a", "00000000000000000000000000000009", {}}));
  raw.read(kHeaderSize);  // HELLO_ACK's header: node-b holds the connection
  auto r = wait_result(p.b->send(Value("x"), p.b->peer("node-a"), {}, {.retry_key = 1}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupportedPayload);
  EXPECT_NE(r.error().message.find("retry keys"), std::string::npos) << r.error().message;
}

TEST(CommDeadlines, ATimeoutTooLongForTheClockWaitsAndANaNOneIsRefused) {
  auto p = connected_pair({}, "tcp");
  const Peer& b = p.a->peer("node-b");
  // 1e10 s is past int64 nanoseconds: it used to fail at once, "timed out after 1e+10 s".
  auto recv = p.a->recv(b, {.tag = 5, .timeout = Seconds(1e10)});
  EXPECT_EQ(recv.wait_for(200ms), nullptr) << "it has no end in sight";
  wait_value(p.b->send(Value("late"), p.b->peer("node-a"), {}, {.tag = 5, .timeout = Seconds(1e10)}));
  EXPECT_EQ(wait_value(std::move(recv)).value, Value("late"));
  auto nan = wait_result(p.a->recv(b, {.tag = 5, .timeout = Seconds(std::nan(""))}));
  ASSERT_FALSE(nan.ok());
  EXPECT_EQ(nan.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(nan.error().message.find("CommOptions::timeout"), std::string::npos) << nan.error().message;
  auto negative = wait_result(p.a->send(Value(1), b, {}, {.timeout = Seconds(-1)}));
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("negative"), std::string::npos) << negative.error().message;
}

TEST(CommDeadlines, EverySendAndRecvEndsAtItsOwnDeadlineWhateverCameBefore) {
  // Deadlines are data under one timer per peer, armed for the earliest of both sides
  // (deadlines.h); each side tells it only of a deadline earlier than it asked for before, and
  // when it fires it is armed again for the earliest left on either side. So a send with a
  // short timeout after one with a long timeout ends at its own deadline, not the other's; and
  // so does a recv whose deadline comes after a send's (the timer, fired for the send, must be
  // armed again for the recv, not for the next send at 20 s), and a send after a recv. The peer
  // listens but never answers, so everything waits (dialing, 30 s).
  ReservedPort port_a;
  MuteListener mute;
  auto a = comm_dialing_mute(mute, 30, port_a);
  const Peer& peer = a->peer("mute");
  auto late_send = a->send(Value(1), peer, {}, {.timeout = Seconds(20)});
  auto late_recv = a->recv(peer, {.tag = 1, .timeout = Seconds(20)});
  auto timed_out_on_time = [&](auto first, auto second) {
    const auto start = std::chrono::steady_clock::now();
    auto f1 = first(Seconds(0.3));
    auto f2 = second(Seconds(0.6));
    auto r1 = wait_result(std::move(f1));
    const double ended_1 = seconds_since(start);
    auto r2 = wait_result(std::move(f2));
    const double ended_2 = seconds_since(start);
    ASSERT_FALSE(r1.ok() || r2.ok());
    EXPECT_EQ(r1.error().code, ErrorCode::kOperationTimeout) << r1.error().message;
    EXPECT_EQ(r2.error().code, ErrorCode::kOperationTimeout) << r2.error().message;
    EXPECT_GE(ended_1, 0.3);
    EXPECT_GE(ended_2, 0.6);
    // The contract is each one's own deadline; the failure guarded against is the 20 s one.
    // 5 s lies between, with room for a loaded machine's scheduling.
    EXPECT_LT(ended_2, 5.0) << "an operation waited for a later deadline";
  };
  auto send = [&](Seconds timeout) { return a->send(Value(2), peer, {}, {.timeout = timeout}); };
  auto recv = [&](Seconds timeout) { return a->recv(peer, {.tag = 2, .timeout = timeout}); };
  timed_out_on_time(send, recv);
  timed_out_on_time(recv, send);
  EXPECT_EQ(late_send.wait_for(0ms), nullptr) << "the 20 s send ended early";
  EXPECT_EQ(late_recv.wait_for(0ms), nullptr) << "the 20 s recv ended early";
  late_send.cancel();
  late_recv.cancel();
  EXPECT_EQ(wait_result(std::move(late_send)).error().code, ErrorCode::kCancelled);
  EXPECT_EQ(wait_result(std::move(late_recv)).error().code, ErrorCode::kCancelled);
}

}  // namespace
}  // namespace wcomm::testing
