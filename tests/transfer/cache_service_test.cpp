// The encoder-cache service end to end on every backend: this process is the consumer, the
// producer is another process (xfer_peer producer).
#include <gtest/gtest.h>
#include <unistd.h>

#include "wcomm/xfer/cache_service.h"
#include "xfer_fixture.h"

namespace wcomm::xfer::testing {
namespace {

constexpr std::size_t kBlockBytes = 4096;

class CacheSuite : public ::testing::TestWithParam<BackendParam> {
 protected:
  void start(std::vector<std::string> extra = {}, std::string model = "test-model", double timeout_s = 20) {
    peer_ = std::make_unique<PeerHarness>(GetParam(), "producer", std::move(extra));
    region_ = SharedRegion::create("wcomm-test-cache-" + std::to_string(::getpid()), 256, kBlockBytes);
    consumer_ = CacheConsumer::create({.comm = peer_->comm(),
                                       .compat = {.model_id = model, .dtype = "float16", .block_bytes = kBlockBytes},
                                       .agent = {.name = "consumer", .backend = parse_backend(GetParam().backend)},
                                       .region = region_,
                                       .request_timeout = std::chrono::duration<double>(timeout_s)});
  }
  void TearDown() override {
    if (consumer_) consumer_->close();
    consumer_.reset();
    peer_.reset();
  }
  void publish(const std::string& key, std::size_t size, std::uint64_t seed) {
    peer_->command(Dict{{"cmd", "publish"}, {"key", key}, {"size", size}, {"seed", seed}});
  }
  // Probes until the item is no longer in flight (bounded).
  ItemStatus wait_settled(const std::string& key, std::chrono::seconds limit = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    ItemStatus s;
    while ((s = consumer_->probe(key)).readiness == Readiness::kInFlight && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(200us);  // probing, bounded by the deadline
    return s;
  }
  std::vector<std::uint8_t> gather(const ItemStatus& s) {
    std::vector<std::uint8_t> out;
    for (std::uint32_t b : s.blocks) out.insert(out.end(), region_->block(b), region_->block(b) + kBlockBytes);
    out.resize(s.bytes);
    return out;
  }

  std::unique_ptr<PeerHarness> peer_;
  std::shared_ptr<SharedRegion> region_;
  std::unique_ptr<CacheConsumer> consumer_;
};

TEST_P(CacheSuite, PublishedItemLandsInTheConsumersBlocks) {
  start();
  const std::size_t size = 100 * kBlockBytes + 77;
  publish("img-1", size, 3);
  EXPECT_EQ(consumer_->probe("img-1").readiness, Readiness::kUnknown);
  ASSERT_TRUE(consumer_->request("img-1", "peer", size).ok());
  ItemStatus s = wait_settled("img-1");
  ASSERT_EQ(s.readiness, Readiness::kReady) << s.reason;
  EXPECT_EQ(s.bytes, size);
  auto item = consumer_->take("img-1");
  ASSERT_TRUE(item.ok());
  EXPECT_EQ(gather(item.value()), pattern(size, 3));
  EXPECT_EQ(region_->free_blocks(), 256u - 101u);
  EXPECT_TRUE(region_->free(item.value().blocks).ok());
  EXPECT_EQ(consumer_->probe("img-1").readiness, Readiness::kUnknown);
}

TEST_P(CacheSuite, CompatibilityMismatchIsRefusedNamingBothHashes) {
  start({}, "another-model");
  publish("img-1", 5000, 3);
  ASSERT_TRUE(consumer_->request("img-1", "peer", 5000).ok());
  ItemStatus s = wait_settled("img-1");
  ASSERT_EQ(s.readiness, Readiness::kFailed);
  const std::string ours = compat_hash({.model_id = "another-model", .dtype = "float16", .block_bytes = kBlockBytes});
  const std::string theirs = compat_hash({.model_id = "test-model", .dtype = "float16", .block_bytes = kBlockBytes});
  EXPECT_NE(s.reason.find("compatibility hash mismatch"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find(ours), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find(theirs), std::string::npos) << s.reason;
  EXPECT_EQ(region_->free_blocks(), 256u);  // the blocks came back
}

TEST_P(CacheSuite, RequestBeforePublishParksThenDrains) {
  start();
  const std::size_t size = 3 * kBlockBytes;
  ASSERT_TRUE(consumer_->request("late", "peer", size).ok());
  ASSERT_TRUE(consumer_->request("late-2", "peer", 10).ok());
  // Wait (bounded) until the producer holds both requests parked.
  std::int64_t parked = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (parked < 2 && std::chrono::steady_clock::now() < deadline)
    parked = peer_->command(Dict{{"cmd", "parked"}}).find("parked")->as<std::int64_t>();
  ASSERT_EQ(parked, 2) << readiness_name(consumer_->probe("late").readiness) << " " << consumer_->probe("late").reason
                       << "\n" << peer_->process().output();
  EXPECT_EQ(consumer_->probe("late").readiness, Readiness::kInFlight);
  publish("late", size, 9);
  publish("late-2", 10, 10);
  ItemStatus s = wait_settled("late");
  ASSERT_EQ(s.readiness, Readiness::kReady) << s.reason;
  EXPECT_EQ(gather(s), pattern(size, 9));
  ItemStatus s2 = wait_settled("late-2");
  ASSERT_EQ(s2.readiness, Readiness::kReady) << s2.reason;
  EXPECT_EQ(gather(s2), pattern(10, 10));
}

TEST_P(CacheSuite, ProducerKilledMidRequestFailsItAndFreesTheBlocks) {
  start({"--stall"}, "test-model", 5);
  publish("doomed", 20 * kBlockBytes, 1);
  ASSERT_TRUE(consumer_->request("doomed", "peer", 20 * kBlockBytes).ok());
  ASSERT_TRUE(peer_->process().wait_for_stderr("stalled before the ack", 20s)) << peer_->process().output();
  EXPECT_EQ(region_->free_blocks(), 256u - 20u);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(peer_->process().kill().has_value());
  ItemStatus s = wait_settled("doomed", 10s);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 6s);  // within the request's 5 s timeout (+ slack)
  ASSERT_EQ(s.readiness, Readiness::kFailed);
  EXPECT_TRUE(s.reason.find("went down") != std::string::npos || s.reason.find("timed out") != std::string::npos) << s.reason;
  EXPECT_EQ(region_->free_blocks(), 256u);
  EXPECT_EQ(consumer_->probe("doomed").readiness, Readiness::kUnknown);  // reported once
}

// The producer SIGKILLs itself just after posting the write (xfer_peer --die-mid-write): its
// bytes are still moving, or some never will. The consumer's request fails within its
// timeout, saying why, and its blocks are free again.
TEST_P(CacheSuite, ProducerKilledWhileItsWriteIsInFlightFailsTheRequestAndFreesTheBlocks) {
  start({"--die-mid-write"}, "test-model", 5);
  publish("doomed", 200 * kBlockBytes, 1);
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(consumer_->request("doomed", "peer", 200 * kBlockBytes).ok());
  EXPECT_TRUE(peer_->process().wait_for(10s).has_value()) << "the producer did not die: " << peer_->process().output();
  ItemStatus s = wait_settled("doomed", 10s);
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 7s);  // within the request's 5 s timeout (+ slack)
  ASSERT_EQ(s.readiness, Readiness::kFailed) << s.reason;
  EXPECT_TRUE(s.reason.find("went down") != std::string::npos || s.reason.find("timed out") != std::string::npos) << s.reason;
  EXPECT_EQ(region_->free_blocks(), 256u);
  EXPECT_EQ(consumer_->probe("doomed").readiness, Readiness::kUnknown);  // reported once
}

TEST_P(CacheSuite, ExhaustionAndDuplicateRequestsAreRefused) {
  start();
  Status big = consumer_->request("huge", "peer", 257 * kBlockBytes);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("exhausted"), std::string::npos) << big.error().message;
  ASSERT_TRUE(consumer_->request("a", "peer", 10).ok());
  EXPECT_FALSE(consumer_->request("a", "peer", 10).ok());
  EXPECT_FALSE(consumer_->request("b", "nobody", 10).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, CacheSuite, ::testing::ValuesIn(all_backends()), param_name);

}  // namespace
}  // namespace wcomm::xfer::testing
