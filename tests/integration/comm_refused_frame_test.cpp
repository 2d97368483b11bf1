// A frame the receiver refuses (here: larger than its max_message_bytes) fails the recv it
// would have reached, on its own tag, in its place in that tag's FIFO; recvs on other tags
// learn only that the connection ended (docs/cpp-api.md, "Delivery semantics"). Over every
// transport a same-host pair can use.
#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "comm_fixture.h"

namespace wcomm::testing {
namespace {

constexpr std::uint64_t kLimit = 64 << 10;
Value big() { return Value(Bytes(std::string(2 * kLimit, 'x'))); }

class CommRefusedFrame : public ::testing::TestWithParam<const char*> {
 protected:
  // node-a sends; node-b refuses frames over kLimit. `down` is set once node-a sees the
  // connection end (node-b refused a frame and dropped it).
  void SetUp() override {
    CommConfig b;
    b.max_message_bytes = kLimit;
    b.max_manifest_bytes = kLimit / 4;  // (below max_message_bytes, as validation wants)
    b.max_metadata_bytes = kLimit / 8;
    p_ = connected_pair(b, GetParam());
    p_.a->on_peer_event([this](const PeerEvent& e) {
      std::lock_guard lock(mu_);
      if (e.kind == PeerEvent::Kind::kDown && !down_set_) {
        down_set_ = true;
        down_.set_value();
      }
    });
  }
  void wait_until_a_sees_the_connection_end() {
    ASSERT_EQ(down_.get_future().wait_for(10s), std::future_status::ready) << "node-b did not drop the connection";
  }
  Future<Received> recv_b(std::uint32_t tag, std::optional<Seconds> timeout = std::nullopt) {
    return p_.b->recv(p_.b->peer("node-a"), {.tag = tag, .timeout = timeout});
  }
  Future<SendResult> send_a(Value v, std::uint32_t tag) { return p_.a->send(std::move(v), p_.a->peer("node-b"), {}, {.tag = tag}); }

  std::mutex mu_;
  bool down_set_ = false;
  std::promise<void> down_;
  Pair p_;  // (last: the Comms, whose handler uses the members above, go first)
};

TEST_P(CommRefusedFrame, WithNobodyWaitingTheErrorTakesTheFramesPlaceOnItsTag) {
  EXPECT_TRUE(wait_result(send_a(Value("first"), 7)).ok());
  // Over a socket the frame is handed to the kernel and the send completes; over shm node-b
  // refuses it before it takes the payload, and the send fails. Either way node-b refuses it.
  (void)wait_result(send_a(big(), 7));
  wait_until_a_sees_the_connection_end();
  EXPECT_TRUE(wait_result(send_a(Value("third"), 7)).ok());  // on a new connection

  // An unrelated tag sees nothing of it (it used to get the refused frame's error).
  auto other = wait_result(recv_b(2, Seconds(0.3)));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kOperationTimeout) << other.error().message;

  EXPECT_EQ(wait_value(recv_b(7)).value, Value("first"));
  auto refused = wait_result(recv_b(7));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kMessageTooLarge) << refused.error().message;
  EXPECT_NE(refused.error().message.find("max_message_bytes"), std::string::npos) << refused.error().message;
  EXPECT_EQ(wait_value(recv_b(7)).value, Value("third"));
}

TEST_P(CommRefusedFrame, AWaitingRecvOnItsTagGetsTheErrorAndOthersLearnTheConnectionEnded) {
  auto other = recv_b(2);
  auto mine = recv_b(7);
  (void)wait_result(send_a(big(), 7));  // (completed or failed: see above)

  auto refused = wait_result(std::move(mine));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kMessageTooLarge) << refused.error().message;
  auto ended = wait_result(std::move(other));
  ASSERT_FALSE(ended.ok());
  EXPECT_EQ(ended.error().code, ErrorCode::kConnectionClosed) << ended.error().message;
  EXPECT_NE(ended.error().message.find("refused a frame on tag 7"), std::string::npos) << ended.error().message;

  // Nothing is left over for later recvs: the next message on either tag arrives as sent.
  wait_until_a_sees_the_connection_end();
  EXPECT_TRUE(wait_result(send_a(Value("after"), 7)).ok());
  EXPECT_EQ(wait_value(recv_b(7)).value, Value("after"));
  EXPECT_EQ(p_.b->stats().errors_without_waiter, 0u);
}

TEST_P(CommRefusedFrame, ARecvIntoOnItsTagGetsTheError) {
  std::vector<float> storage(4);
  auto into = p_.b->recv_into(p_.b->peer("node-a"), {Tensor::borrow(storage.data(), DType::kFloat32, {4})}, {.tag = 7});
  (void)wait_result(send_a(big(), 7));
  auto refused = wait_result(std::move(into));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kMessageTooLarge) << refused.error().message;
}

INSTANTIATE_TEST_SUITE_P(Transports, CommRefusedFrame, ::testing::Values("tcp", "unix", "shm", "auto"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace wcomm::testing
