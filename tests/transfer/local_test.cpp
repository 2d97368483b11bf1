// In-process tests of the transfer layer's pieces: the registration cache, metadata checks,
// the shared region's allocator and join, capability queries, the compatibility hash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "build_features.h"
#include "process_util.h"
#include "transfer/metadata.h"
#include "transfer/registration_cache.h"
#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"
#include "wcomm/xfer/cache_service.h"
#include "wcomm/xfer/shared_region.h"

namespace wcomm::xfer {
namespace {

std::string unique_name(const char* what) { return std::string("wcomm-test-") + what + "-" + std::to_string(::getpid()); }

TEST(RegistrationCache, OverlappingAndTouchingRangesMergeAndSplitBack) {
  RegistrationCache c;
  EXPECT_EQ(c.add({100, 200}).added.size(), 1u);
  RegionChange grow = c.add({150, 300});
  ASSERT_EQ(grow.removed.size(), 1u);
  EXPECT_EQ(grow.added, (std::vector<Range>{{100, 300}}));
  c.add({300, 400});  // touching merges too
  c.add({1000, 1100});
  EXPECT_EQ(c.regions(), (std::vector<Range>{{100, 400}, {1000, 1100}}));
  EXPECT_TRUE(c.add({120, 130}).added.empty());  // inside: no backend work
  EXPECT_TRUE(c.find(120, 390).has_value());
  EXPECT_FALSE(c.find(390, 1000).has_value());
  EXPECT_FALSE(c.remove({101, 200}).has_value());  // never registered
  auto split = c.remove({150, 300});
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(c.regions(), (std::vector<Range>{{100, 200}, {300, 400}, {1000, 1100}}));
  ASSERT_TRUE(c.remove({120, 130}).has_value());
  EXPECT_EQ(c.regions().size(), 3u);
}

TEST(Agent, RegistrationsMergeAndDeregisterNeedsAnExactRange) {
  auto agent = Agent::create({.name = "a", .backend = BackendKind::kCma});
  std::vector<char> buf(1 << 16);
  ASSERT_TRUE(agent->register_memory(buf.data(), 1000).ok());
  ASSERT_TRUE(agent->register_memory(buf.data() + 500, 1000).ok());
  ASSERT_EQ(agent->registered().size(), 1u);
  EXPECT_EQ(agent->registered()[0].len, 1500u);
  Status bad = agent->deregister(buf.data(), 1500);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("must match a register_memory call"), std::string::npos);
  EXPECT_TRUE(agent->deregister(buf.data(), 1000).ok());
  EXPECT_TRUE(agent->deregister(buf.data() + 500, 1000).ok());
  EXPECT_TRUE(agent->registered().empty());
  EXPECT_FALSE(agent->register_memory(nullptr, 10).ok());
}

TEST(Agent, CapabilitiesAreQueriedNotThrown) {
  auto agent = Agent::create({.name = "a"});
  const Capabilities cma = agent->capabilities(BackendKind::kCma);
  EXPECT_TRUE(cma.available) << cma.reason;  // this machine allows process_vm_* (checked at set-up)
  EXPECT_TRUE(cma.same_host_only);
  EXPECT_FALSE(cma.notifications);  // no Comm
  const Capabilities tcp = agent->capabilities(BackendKind::kTcp);
  EXPECT_FALSE(tcp.available);
  EXPECT_NE(tcp.reason.find("Comm"), std::string::npos) << tcp.reason;
  const Capabilities ucx = agent->capabilities(BackendKind::kUcx);
  if (wcomm::testing::kHaveUcx) EXPECT_TRUE(ucx.available) << ucx.reason;
  else EXPECT_NE(ucx.reason.find("WCOMM_WITH_UCX"), std::string::npos) << ucx.reason;  // and libucx-dev
  EXPECT_THROW(Agent::create({.name = "b", .backend = BackendKind::kTcp}), InvalidArgumentError);
  auto cma_only = Agent::create({.name = "c", .backend = BackendKind::kCma});  // starts no UCX
  EXPECT_FALSE(cma_only->capabilities(BackendKind::kUcx).available);
  EXPECT_NE(cma_only->capabilities(BackendKind::kUcx).reason.find("not selected"), std::string::npos);
  EXPECT_THROW(Agent::create({.name = ""}), InvalidArgumentError);
  EXPECT_THROW(parse_backend("rdma"), InvalidArgumentError);
}

TEST(Agent, MalformedOwnAndStaleMetadataAreRefused) {
  auto a = Agent::create({.name = "a"});
  auto b = Agent::create({.name = "b"});
  EXPECT_FALSE(a->add_remote("not msgpack").ok());
  EXPECT_FALSE(a->add_remote(encode_descs({})).ok());  // an array, not a map
  Result<std::string> own = a->add_remote(a->metadata());
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.error().message.find("own metadata"), std::string::npos);
  ASSERT_TRUE(a->add_remote(b->metadata()).ok());
  EXPECT_EQ(a->backend_for("b").value(), BackendKind::kCma);  // auto: same host -> cma
  AgentMetadata older = decode_metadata(b->metadata()).value();
  older.generation -= 1;
  Result<std::string> stale = a->add_remote(encode_metadata(older));
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("stale metadata for agent 'b'"), std::string::npos) << stale.error().message;
}

TEST(Agent, TransfersWithinOneProcessAndTimeoutsAndRelease) {
  auto a = Agent::create({.name = "a", .backend = BackendKind::kCma});
  auto b = Agent::create({.name = "b", .backend = BackendKind::kCma});
  std::vector<std::uint8_t> src(1 << 20, 7), dst(1 << 20, 0);
  ASSERT_TRUE(a->register_memory(src.data(), src.size()).ok());
  ASSERT_TRUE(b->register_memory(dst.data(), dst.size()).ok());
  ASSERT_TRUE(a->add_remote(b->metadata()).ok());
  auto h = a->post(Op::kWrite, {{reinterpret_cast<std::uint64_t>(src.data()), src.size(), 0}}, "b",
                   {{reinterpret_cast<std::uint64_t>(dst.data()), dst.size(), 0}});
  ASSERT_TRUE(h.ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a->poll(h.value()).state == XferState::kPending && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_EQ(a->poll(h.value()).state, XferState::kDone);
  EXPECT_EQ(dst, src);
  EXPECT_TRUE(a->release(h.value()).ok());
  EXPECT_FALSE(a->release(h.value()).ok());  // released already
  EXPECT_NE(a->poll(h.value()).reason.find("unknown transfer handle"), std::string::npos);
}

TEST(SharedRegion, AllocFreeExhaustionDoubleFreeAndForeignIndices) {
  auto r = SharedRegion::create(unique_name("alloc"), 8, 4096);
  EXPECT_TRUE(std::filesystem::exists("/dev/shm/" + r->name()));
  auto a = r->alloc(5);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(r->free_blocks(), 3u);
  auto none = r->alloc(4);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("exhausted: 4 blocks asked for, 3 of 8 free"), std::string::npos) << none.error().message;
  Status foreign = r->free({a.value()[0], 8});
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message.find("block 8 is not in shared region"), std::string::npos);
  EXPECT_EQ(r->free_blocks(), 3u);  // refused whole
  ASSERT_TRUE(r->free({a.value()[0]}).ok());
  Status twice = r->free({a.value()[0]});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("not allocated (a double free?"), std::string::npos);
  Status dup = r->free({a.value()[1], a.value()[1]});
  EXPECT_FALSE(dup.ok());
  EXPECT_FALSE(r->alloc(0).ok());
  EXPECT_THROW(r->block(8), InvalidArgumentError);
  EXPECT_THROW(SharedRegion::create(r->name(), 1, 1), ConnectionFailedError);  // exists
  EXPECT_THROW(SharedRegion::create("a/b", 1, 1), InvalidArgumentError);
  EXPECT_THROW(SharedRegion::create(unique_name("zero"), 0, 4096), InvalidArgumentError);
}

TEST(SharedRegion, JoinerWaitsForTheCreatorAndSeesItsBytes) {
  const std::string name = unique_name("join");
  std::unique_ptr<SharedRegion> joined;
  std::thread joiner([&] { joined = SharedRegion::join(name, std::chrono::seconds(10)); });
  auto created = SharedRegion::create(name, 4, 1 << 16);
  created->block(2)[5] = 42;
  joiner.join();
  ASSERT_TRUE(joined);
  EXPECT_FALSE(joined->is_creator());
  EXPECT_EQ(joined->block_count(), 4u);
  EXPECT_EQ(joined->block_bytes(), 1u << 16);
  EXPECT_EQ(joined->block(2)[5], 42);
  joined.reset();
  created.reset();
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name));  // the creator removed it
  EXPECT_THROW(SharedRegion::join(name, std::chrono::milliseconds(50)), OperationTimeoutError);
}

TEST(CompatHash, CoversEveryFieldAndIsSha256) {
  CacheCompat base{.model_id = "m", .dtype = "float16", .block_bytes = 4096};
  const std::string h = compat_hash(base);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h, compat_hash(base));
  for (auto change : {+[](CacheCompat& c) { c.version = "x"; }, +[](CacheCompat& c) { c.model_id = "n"; },
                      +[](CacheCompat& c) { c.dtype = "bfloat16"; }, +[](CacheCompat& c) { c.block_bytes = 8192; }}) {
    CacheCompat other = base;
    change(other);
    EXPECT_NE(compat_hash(other), h);
  }
}


TEST(Agent, AllocatedMemoryIsRegisteredAndMovesBytes) {
  auto a = Agent::create({.name = "a"});
  auto b = Agent::create({.name = "b"});
  auto src = a->allocate_memory(1 << 20);
  auto dst = b->allocate_memory(1 << 20);
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_EQ(b->registered().size(), 1u);
  EXPECT_EQ(b->registered()[0].addr, reinterpret_cast<std::uint64_t>(dst.value()));
  std::memset(src.value(), 9, 1 << 20);
  ASSERT_TRUE(a->add_remote(b->metadata()).ok());
  auto h = a->post(Op::kWrite, {{reinterpret_cast<std::uint64_t>(src.value()), 1 << 20, 0}}, "b",
                   {{reinterpret_cast<std::uint64_t>(dst.value()), 1 << 20, 0}});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(a->wait(h.value(), std::chrono::seconds(10)).state, XferState::kDone);
  EXPECT_EQ(static_cast<std::uint8_t*>(dst.value())[12345], 9);
  EXPECT_TRUE(a->release(h.value()).ok());
  EXPECT_TRUE(b->free_memory(dst.value()).ok());
  EXPECT_TRUE(b->registered().empty());
  EXPECT_FALSE(b->free_memory(dst.value()).ok());
  EXPECT_FALSE(a->allocate_memory(0).ok());
}


TEST(Agent, AutoPrefersCmaThenUcxThenTcpAndSaysWhyNoneFits) {
  WCOMM_SKIP_WITHOUT(wcomm::testing::kHaveUcx, "WCOMM_WITH_UCX");
  auto a = Agent::create({.name = "a"});
  auto b = Agent::create({.name = "b"});
  std::vector<char> mem(4096);
  ASSERT_TRUE(b->register_memory(mem.data(), mem.size()).ok());
  AgentMetadata m = decode_metadata(b->metadata()).value();
  ASSERT_TRUE(a->add_remote(encode_metadata(m)).ok());
  EXPECT_EQ(a->backend_for("b").value(), BackendKind::kCma);  // same host
  m.host_id = "another-host";
  ASSERT_TRUE(a->add_remote(encode_metadata(m)).ok());
  EXPECT_EQ(a->backend_for("b").value(), BackendKind::kUcx);  // not same host: ucx
  m.ucx_address.clear();
  m.ucx_rkeys.clear();
  Result<std::string> none = a->add_remote(encode_metadata(m));
  ASSERT_FALSE(none.ok());  // no Comm, so no tcp either; every reason is named
  EXPECT_NE(none.error().message.find("another host"), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find("no ucx address"), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find("AgentConfig.comm is not set"), std::string::npos) << none.error().message;
}

}  // namespace
}  // namespace wcomm::xfer


namespace wcomm::xfer {
namespace {

TEST(Agent, AutoFallsBackToTcpOverTheAgentsComm) {
  auto ports = wcomm::testing::free_tcp_ports(2);
  const Peer pa{"node-a", "127.0.0.1", ports[0]}, pb{"node-b", "127.0.0.1", ports[1]};
  auto ca = Comm::create({.local = pa, .peers = {pb}});
  auto cb = Comm::create({.local = pb, .peers = {pa}});
  {
    auto a = Agent::create({.name = "a", .comm = ca});
    auto b = Agent::create({.name = "b", .comm = cb});
    std::vector<std::uint8_t> src(100000, 5), dst(100000, 0);
    ASSERT_TRUE(a->register_memory(src.data(), src.size()).ok());
    ASSERT_TRUE(b->register_memory(dst.data(), dst.size()).ok());
    AgentMetadata m = decode_metadata(b->metadata()).value();
    m.host_id = "another-host";  // as if b were elsewhere and had no ucx
    m.ucx_address.clear();
    m.ucx_rkeys.clear();
    ASSERT_TRUE(a->add_remote(encode_metadata(m)).ok());
    EXPECT_EQ(a->backend_for("b").value(), BackendKind::kTcp);
    auto h = a->post(Op::kWrite, {{reinterpret_cast<std::uint64_t>(src.data()), src.size(), 0}}, "b",
                     {{reinterpret_cast<std::uint64_t>(dst.data()), dst.size(), 0}}, {.notification = "hi"});
    ASSERT_TRUE(h.ok()) << h.error().message;
    XferStatus s = a->wait(h.value(), std::chrono::seconds(20));
    ASSERT_EQ(s.state, XferState::kDone) << s.reason;
    // The notification went out before the transfer was reported done; it is in b's inbox
    // once b's loop has handled it (bounded wait). b reads its memory after that, as a real
    // consumer does: b's loop wrote it before filing the notification. (Read after a's
    // completion instead, TSan saw a race: that order runs through a socket, which TSan does
    // not count as synchronisation.)
    std::vector<Notification> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.empty() && std::chrono::steady_clock::now() < deadline) {
      got = b->take_notifications();
      if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].remote, "a");
    EXPECT_EQ(got[0].message, "hi");
    EXPECT_EQ(dst, src);
  }
  ca->close();
  cb->close();
}

}  // namespace
}  // namespace wcomm::xfer

namespace wcomm::xfer {
namespace {

// Not a speed check: an ordering one. With 4 KiB chunks a 64 MiB transfer is 16384 turns of
// the queue, and a 4 KiB transfer posted after it gets its turn after at most one chunk per
// worker, so it completes while the large one is still moving.
TEST(Agent, SmallTransferIsNotQueuedBehindALargeOne) {
  auto a = Agent::create({.name = "a", .backend = BackendKind::kCma, .chunk_bytes = 4096});
  auto b = Agent::create({.name = "b", .backend = BackendKind::kCma});
  const std::size_t big = 64u << 20;
  std::vector<std::uint8_t> src(big + 4096, 1), dst(big + 4096, 0);
  ASSERT_TRUE(a->register_memory(src.data(), src.size()).ok());
  ASSERT_TRUE(b->register_memory(dst.data(), dst.size()).ok());
  ASSERT_TRUE(a->add_remote(b->metadata()).ok());
  const auto s = reinterpret_cast<std::uint64_t>(src.data()), d = reinterpret_cast<std::uint64_t>(dst.data());
  auto large = a->post(Op::kWrite, {{s, big, 0}}, "b", {{d, big, 0}});
  auto small = a->post(Op::kWrite, {{s + big, 4096, 0}}, "b", {{d + big, 4096, 0}});
  ASSERT_TRUE(large.ok() && small.ok());
  EXPECT_EQ(a->wait(small.value(), std::chrono::seconds(20)).state, XferState::kDone);
  EXPECT_EQ(a->poll(large.value()).state, XferState::kPending);
  EXPECT_EQ(a->wait(large.value(), std::chrono::seconds(60)).state, XferState::kDone);
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace wcomm::xfer
