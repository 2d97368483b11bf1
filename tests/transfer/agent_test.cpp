// The transfer suite every backend runs: a test-process Agent against an Agent in another
// process (xfer_peer), WRITE and READ, bytes checked by SHA-256 on both sides.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "xfer_fixture.h"

namespace wcomm::xfer::testing {
namespace {

class AgentSuite : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    peer_ = std::make_unique<PeerHarness>(GetParam(), "agent");
    agent_ = Agent::create({.name = "test", .backend = parse_backend(GetParam().backend), .comm = peer_->comm(),
                            .default_timeout = 20s});
    local_ = pattern(kLocalBytes, 11);
    ASSERT_TRUE(agent_->register_memory(local_.data(), local_.size()).ok());
    load_peer();
    // The peer loads us too (for notifications and the tcp backend's checks of who writes).
    Dict r = peer_->command(Dict{{"cmd", "add_remote"}, {"metadata", Bytes(agent_->metadata())}});
    ASSERT_TRUE(r.find("ok")->as<bool>()) << r.find("reason")->as<std::string>();
  }
  void load_peer() {
    Dict m = peer_->command(Dict{{"cmd", "metadata"}});
    metadata_ = std::string(m.find("metadata")->as<Bytes>().view());
    base_ = m.find("base")->as<std::int64_t>();
    Result<std::string> r = agent_->add_remote(metadata_);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(agent_->backend_for("peer").value(), parse_backend(GetParam().backend));
  }
  Desc local(std::uint64_t off, std::uint64_t len) { return {reinterpret_cast<std::uint64_t>(local_.data()) + off, len, 0}; }
  Desc remote(std::uint64_t off, std::uint64_t len) { return {static_cast<std::uint64_t>(base_) + off, len, 0}; }

  static constexpr std::size_t kLocalBytes = 16u << 20;
  std::unique_ptr<PeerHarness> peer_;
  std::unique_ptr<Agent> agent_;
  std::vector<std::uint8_t> local_;
  std::string metadata_;
  std::int64_t base_ = 0;
};

TEST_P(AgentSuite, WriteLandsInThePeersMemory) {
  const std::uint64_t len = (1u << 20) + 123;
  auto h = agent_->post(Op::kWrite, {local(5, len)}, "peer", {remote(4096 + 1, len)});
  ASSERT_TRUE(h.ok()) << h.error().message;
  XferStatus s = wait_done(*agent_, h.value());
  ASSERT_EQ(s.state, XferState::kDone) << s.reason;
  EXPECT_TRUE(agent_->release(h.value()).ok());
  EXPECT_EQ(peer_->peer_sha(4096 + 1, len), sha256_hex(local_.data() + 5, len));
}

TEST_P(AgentSuite, ReadFetchesThePeersMemory) {
  const std::uint64_t len = 3u << 20;
  const auto expected = pattern(64u << 20, 7);  // what the peer filled its memory with
  auto h = agent_->post(Op::kRead, {local(0, len / 2), local(len / 2 + 100, len / 2)}, "peer",
                        {remote(1000, len / 2), remote(1000 + len / 2, len / 2)});
  ASSERT_TRUE(h.ok()) << h.error().message;
  XferStatus s = wait_done(*agent_, h.value());
  ASSERT_EQ(s.state, XferState::kDone) << s.reason;
  EXPECT_EQ(0, std::memcmp(local_.data(), expected.data() + 1000, len / 2));
  EXPECT_EQ(0, std::memcmp(local_.data() + len / 2 + 100, expected.data() + 1000 + len / 2, len / 2));
  EXPECT_TRUE(agent_->release(h.value()).ok());
}

TEST_P(AgentSuite, SixtyFourConcurrentMixedSizeTransfersAllCorrect) {
  struct Posted {
    XferHandle h;
    Op op;
    std::uint64_t local_off, remote_off, len;
  };
  std::vector<Posted> posted;
  std::uint64_t local_off = 0, remote_off = 0;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t len = (i % 4 == 0) ? (256u << 10) + i : (i % 4 == 1) ? 4096 : (i % 4 == 2) ? 1 + i * 37 : (64u << 10);
    const Op op = i % 2 ? Op::kRead : Op::kWrite;
    auto h = agent_->post(op, {local(local_off, len)}, "peer", {remote(remote_off, len)});
    ASSERT_TRUE(h.ok()) << h.error().message;
    posted.push_back({h.value(), op, local_off, remote_off, len});
    local_off += len + 64;
    remote_off += len + 4096;
  }
  const auto expected = pattern(64u << 20, 7);
  for (const Posted& p : posted) {
    XferStatus s = wait_done(*agent_, p.h);
    ASSERT_EQ(s.state, XferState::kDone) << s.reason;
    if (p.op == Op::kRead) EXPECT_EQ(0, std::memcmp(local_.data() + p.local_off, expected.data() + p.remote_off, p.len));
    else EXPECT_EQ(peer_->peer_sha(p.remote_off, p.len), sha256_hex(local_.data() + p.local_off, p.len));
    EXPECT_TRUE(agent_->release(p.h).ok());
  }
}

TEST_P(AgentSuite, NotificationArrivesAfterTheBytes) {
  auto h = agent_->post(Op::kWrite, {local(0, 8192)}, "peer", {remote(0, 8192)}, {.notification = "item-42 is in"});
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(wait_done(*agent_, h.value()).state, XferState::kDone);
  // The notification travels on its own tag, so it may land after a command sent later:
  // ask until it is there (bounded in time: under TSan with a loaded host 200 quick asks
  // were once not enough).
  List got;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (got.items.empty() && std::chrono::steady_clock::now() < until) {
    got = peer_->command(Dict{{"cmd", "notifications"}}).find("notifications")->as<List>();
    if (got.items.empty()) std::this_thread::sleep_for(1ms);  // polling another process, bounded above
  }
  ASSERT_EQ(got.items.size(), 1u);
  EXPECT_EQ(got.items[0].as<Tuple>().items[0].as<std::string>(), "test");
  EXPECT_EQ(got.items[0].as<Tuple>().items[1].as<std::string>(), "item-42 is in");
  EXPECT_EQ(peer_->peer_sha(0, 8192), sha256_hex(local_.data(), 8192));
}

TEST_P(AgentSuite, BadDescriptorsAreRefusedWithTheReason) {
  auto outside = agent_->post(Op::kWrite, {local(0, 100)}, "peer", {remote((64u << 20) - 50, 100)});
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("not inside memory agent 'peer' registered"), std::string::npos) << outside.error().message;
  auto unregistered = agent_->post(Op::kWrite, {{4096, 100, 0}}, "peer", {remote(0, 100)});
  ASSERT_FALSE(unregistered.ok());
  EXPECT_NE(unregistered.error().message.find("not inside registered memory"), std::string::npos);
  auto lengths = agent_->post(Op::kWrite, {local(0, 100)}, "peer", {remote(0, 99)});
  ASSERT_FALSE(lengths.ok());
  EXPECT_NE(lengths.error().message.find("same, non-zero length"), std::string::npos);
  auto device = agent_->post(Op::kWrite, {{local(0, 100).addr, 100, 1}}, "peer", {remote(0, 100)});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.error().message.find("device 1"), std::string::npos);
  auto nobody = agent_->post(Op::kWrite, {local(0, 100)}, "nobody", {remote(0, 100)});
  ASSERT_FALSE(nobody.ok());
  EXPECT_FALSE(agent_->release(XferHandle{999999}).ok());
  EXPECT_EQ(agent_->poll(XferHandle{999999}).state, XferState::kError);
}

TEST_P(AgentSuite, KilledPeerFailsTheTransferWithinItsTimeout) {
  ASSERT_TRUE(peer_->process().kill().has_value());
  const auto start = std::chrono::steady_clock::now();
  auto h = agent_->post(Op::kWrite, {local(0, 8u << 20)}, "peer", {remote(0, 8u << 20)}, {.timeout = 3s});
  if (!h.ok()) return;  // refused at once is fine too: it named the dead peer
  XferStatus s = wait_done(*agent_, h.value(), 10s);
  EXPECT_EQ(s.state, XferState::kError);
  EXPECT_FALSE(s.reason.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << s.reason;
  EXPECT_TRUE(agent_->release(h.value()).ok());
}

TEST_P(AgentSuite, StaleMetadataAfterThePeerRestartsIsRefused) {
  const std::string old_metadata = metadata_;
  ASSERT_TRUE(peer_->process().kill().has_value());
  peer_->start();
  load_peer();  // the new incarnation
  Result<std::string> stale = agent_->add_remote(old_metadata);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("stale metadata"), std::string::npos) << stale.error().message;
  // And a fresh agent that never saw the new one refuses the old metadata too where it can
  // tell the process is gone (cma checks the pid's start time).
  if (GetParam().backend == "cma") {
    auto fresh = Agent::create({.name = "fresh", .backend = BackendKind::kCma});
    Result<std::string> r = fresh->add_remote(old_metadata);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("gone or restarted"), std::string::npos) << r.error().message;
  }
  // The new incarnation works.
  auto h = agent_->post(Op::kWrite, {local(0, 4096)}, "peer", {remote(0, 4096)});
  ASSERT_TRUE(h.ok()) << h.error().message;
  XferStatus s = wait_done(*agent_, h.value());
  EXPECT_EQ(s.state, XferState::kDone) << s.reason;
}

INSTANTIATE_TEST_SUITE_P(Backends, AgentSuite, ::testing::ValuesIn(all_backends()), param_name);

}  // namespace
}  // namespace wcomm::xfer::testing
