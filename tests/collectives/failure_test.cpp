// Failures and bad input: a rank killed mid-allreduce or stalled makes every other rank fail
// within the timeout, naming it; mismatched calls and bad rendezvous input give every rank a
// clear error, never a hang. Ranks are processes (fork) where one must die, threads otherwise.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "collectives/call.h"
#include "comm_fixture.h"
#include "fault_proxy.h"
#include "world.h"

namespace wcomm::test {
namespace {

using Clock = std::chrono::steady_clock;

// What a rank's call ended with.
struct Outcome {
  bool failed = false;
  int code = -1;
  int rank = -2;
  std::string message;
};

// Runs body on every rank (threads); collects each rank's CollectiveError / CommError.
std::vector<Outcome> run_world_outcomes(int world, const std::function<void(Group&)>& body,
                                        std::function<RendezvousSpec(int, std::uint16_t)> spec_of = {},
                                        GroupOptions options = {}) {
  std::uint16_t port = free_tcp_port();
  std::vector<Outcome> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = Group::create(spec_of ? spec_of(r, port) : local_spec(r, world, port), options);
        body(*group);
      } catch (const CollectiveError& e) {
        out[r] = {true, static_cast<int>(e.code()), e.rank(), e.what()};
      } catch (const CommError& e) {
        out[r] = {true, static_cast<int>(e.code()), -2, e.what()};
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(GroupFailure, MismatchedSizesFailEveryRank) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling}) {
    auto out = run_world_outcomes(4, [&](Group& g) {
      std::vector<float> x(g.rank() == 1 ? 1000 : 1001, 1.0f);
      g.allreduce(Tensor::borrow(x.data(), DType::kFloat32, {static_cast<std::int64_t>(x.size())}), ReduceOp::kSum,
                  {.timeout = Seconds(20), .algorithm = a});
    });
    for (int r = 0; r < 4; ++r) {
      EXPECT_TRUE(out[r].failed) << "rank " << r;
      EXPECT_EQ(out[r].code, static_cast<int>(ErrorCode::kInvalidArgument)) << "rank " << r << ": " << out[r].message;
      EXPECT_NE(out[r].message.find("same sizes"), std::string::npos) << out[r].message;
      EXPECT_EQ(out[r].message.find("earlier call"), std::string::npos) << out[r].message;
    }
  }
}

TEST(GroupFailure, MismatchedDtypesAndOpsFailEveryRank) {
  auto out = run_world_outcomes(3, [&](Group& g) {
    std::vector<std::int32_t> x(64, 1);
    g.allreduce(Tensor::borrow(x.data(), g.rank() == 2 ? DType::kInt32 : DType::kFloat32, {64}));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].code, static_cast<int>(ErrorCode::kInvalidArgument)) << "rank " << r << ": " << out[r].message;
    EXPECT_NE(out[r].message.find("same sizes"), std::string::npos) << out[r].message;
  }
  out = run_world_outcomes(3, [&](Group& g) {
    std::vector<float> x(64, 1);
    g.allreduce(Tensor::borrow(x.data(), DType::kFloat32, {64}), g.rank() == 0 ? ReduceOp::kMax : ReduceOp::kSum);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r].code, static_cast<int>(ErrorCode::kInvalidArgument)) << out[r].message;
  // A broken group refuses later calls at once, saying why.
  out = run_world_outcomes(2, [&](Group& g) {
    std::vector<float> x(g.rank() + 1);
    try {
      g.allreduce(Tensor::borrow(x.data(), DType::kFloat32, {g.rank() + 1}));
    } catch (const CollectiveError&) {
    }
    g.barrier();
  });
  for (int r = 0; r < 2; ++r) EXPECT_NE(out[r].message.find("earlier call"), std::string::npos) << out[r].message;
}

TEST(GroupFailure, BadRendezvousInputFailsEveryRank) {
  // A rank outside the world, and a duplicate rank: rank 0 tells every rank.
  for (int bad : {7, 1}) {
    auto out = run_world_outcomes(3, [](Group&) {}, [&](int r, std::uint16_t port) {
      auto s = local_spec(r == 2 ? bad : r, 3, port);
      s.timeout = std::chrono::seconds(20);
      return s;
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(out[r].code, static_cast<int>(ErrorCode::kInvalidArgument)) << "rank " << r << ": " << out[r].message;
      EXPECT_NE(out[r].message.find(bad == 7 ? "outside the world" : "registered twice"), std::string::npos)
          << out[r].message;
    }
  }
  // Different world sizes.
  auto out = run_world_outcomes(2, [](Group&) {}, [](int r, std::uint16_t port) { return local_spec(r, r == 1 ? 3 : 2, port); });
  for (int r = 0; r < 2; ++r) EXPECT_NE(out[r].message.find("world size"), std::string::npos) << out[r].message;
  // A world of 0, or no address: refused at once.
  EXPECT_THROW(Group::create(local_spec(0, 0, 1)), InvalidArgumentError);
  RendezvousSpec none;
  none.rank = 1;
  none.world = 2;
  EXPECT_THROW(Group::create(none), InvalidArgumentError);
  RendezvousSpec dup;
  dup.rank = 0;
  dup.world = 2;
  dup.peers = {Peer{.node_id = "", .host = "127.0.0.1", .port = 5000}, Peer{.node_id = "", .host = "127.0.0.1", .port = 5000}};
  EXPECT_THROW(Group::create(dup), InvalidArgumentError);
}

TEST(GroupFailure, StalledRankMakesEveryRankTimeOut) {
  auto start = Clock::now();
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  auto out = run_world_outcomes(4, [&](Group& g) {
    std::vector<float> x(1 << 16, 1.0f);
    auto t = Tensor::borrow(x.data(), DType::kFloat32, {1 << 16});
    if (g.rank() == 2) {  // never joins the allreduce until the others have given up
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release; });
      return;
    }
    try {
      g.allreduce(t, ReduceOp::kSum, {.timeout = Seconds(1)});
    } catch (...) {
      std::lock_guard lock(mu);
      release = true;
      cv.notify_all();
      throw;
    }
  });
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 15.0);
  // Which rank is named depends on which rank's clock ran out first: the rank it waited on
  // (rank 2, or a rank that was itself waiting). Every rank fails with the timeout.
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(out[r].failed) << "rank " << r;
    EXPECT_GE(out[r].rank, 0) << out[r].message;
    EXPECT_EQ(out[r].code, static_cast<int>(ErrorCode::kOperationTimeout)) << out[r].message;
  }
}

// A failed call must not return while a transfer it started still uses the caller's tensor.
// Rank 0 is a real Group; ranks 1 and 2 are bare Comms that play their part by hand (they
// never cancel anything: a bare Comm ignores aborts). Rank 2 (rank 0's ring predecessor in
// allgather) sends the second segment of its block first, through a proxy capped at 1 MiB/s:
// its frame claims rank 0's recv_into of that segment, which writes straight into rank 0's
// output for a second. Meanwhile rank 1 sends rank 0 an abort, so rank 0's call fails while
// that frame is still coming. Once the call has thrown, the output must stay as it is (the
// caller may free it). stall: the proxy then stops the frame for good; the call gives up on
// it after its bound (the call's timeout, 2 s here) by ending the connection.
struct AbortMidFrame {
  double threw_after_abort = -1;  // s from the abort to the throw
  std::size_t changed_after_throw = 0;  // bytes of the output that changed in the 200 ms after
  Outcome outcome;
};

AbortMidFrame abort_rank_0_mid_frame(bool stall) {
  constexpr std::int64_t kN = 512 << 10;  // floats per rank: two 1 MiB segments
  wcomm::testing::ReservedPort reserved[3];  // held until every Comm listens
  std::uint16_t ports[3] = {reserved[0].port(), reserved[1].port(), reserved[2].port()};
  wcomm::testing::FaultProxy to_0(ports[0]);  // rank 2 reaches rank 0 through it
  CommConfig config;
  config.transport = "tcp";  // through the proxy, not a same-host path around it
  auto peer = [&](int k) { return Peer{"rank-" + std::to_string(k), "127.0.0.1", ports[k]}; };
  Peer rank_0_via_proxy{"rank-0", "127.0.0.1", to_0.port()};
  auto c2 = Comm::create({peer(2), {rank_0_via_proxy, peer(1)}, "127.0.0.1", config});
  auto c1 = Comm::create({peer(1), {peer(0), peer(2)}, "127.0.0.1", config});
  auto c0 = Comm::create({peer(0), {peer(1), peer(2)}, "127.0.0.1", config});
  GroupOptions options;
  options.segment_bytes = 1 << 20;
  Group g0(c0, 0, 3, options);

  std::vector<float> in(kN, 1.0f), out(3 * kN, 0.0f);
  AbortMidFrame result;
  std::atomic<bool> thrown{false};
  Clock::time_point threw_at;
  const std::uint64_t recvs_before = c0->stats().peers.at("rank-2").recvs_waiting;  // (the group's own)
  std::thread rank_0([&] {
    try {
      g0.allgather(Tensor::borrow(in.data(), DType::kFloat32, {kN}), Tensor::borrow(out.data(), DType::kFloat32, {3 * kN}),
                   {.timeout = Seconds(stall ? 2 : 30)});
    } catch (const CollectiveError& e) {
      threw_at = Clock::now();
      result.outcome = {true, static_cast<int>(e.code()), e.rank(), e.what()};
    }
    thrown = true;
    std::vector<float> seen = out;  // what the caller has once the call is over
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (std::size_t i = 0; i < out.size(); ++i) result.changed_after_throw += seen[i] != out[i] ? 4 : 0;
  });

  // Rank 0 posts its recv_intos right after its first sends to rank 1; rank 2's frame must
  // come after its recv_into on rank 2 (one that came before would be read into fresh
  // storage: nothing to see here then).
  auto first = c1->recv(c1->peer("rank-0"), {.tag = kCollectiveTagBase | 0u, .timeout = Seconds(10)}).wait();
  EXPECT_TRUE(first.ok()) << first.error().message;
  const auto posted_by = Clock::now() + std::chrono::seconds(10);
  // (Both segments of rank 2's block, the first two recv_intos it posts there.)
  const auto posted = [&] { return c0->stats().peers.at("rank-2").recvs_waiting >= recvs_before + 2; };
  while (!posted() && Clock::now() < posted_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a bounded poll
  EXPECT_TRUE(posted()) << "rank 0 never posted its recv_intos from rank 2";
  // Rank 2's block, segment 1 (tag step 1), ahead of segment 0.
  const Value signature = Dict{{"wcomm_group", "allgather(float32 x " + std::to_string(kN) + ") #0"}};
  std::vector<float> segment(kN / 2, 7.0f);
  to_0.set_bandwidth(wcomm::testing::Direction::kToTarget, 1 << 20);
  // Not compressed: once the sender measures the 1 MiB/s link, adaptive compression would
  // shrink the rest of this constant tensor to a few hundred bytes, and the frame would end
  // before the stall (it did, about once in a hundred runs under load).
  auto sending = c2->send(Value(Tensor::borrow(segment.data(), DType::kFloat32, {kN / 2})), c2->peer("rank-0"), signature,
                          {.tag = kCollectiveTagBase | 1u, .compress = Compression::kOff});
  EXPECT_TRUE(to_0.wait_until([](const wcomm::testing::FaultProxyCounters& c) { return c.bytes_to_target > (256u << 10); },
                              std::chrono::seconds(10)));
  if (stall) to_0.set_stall(wcomm::testing::Direction::kToTarget, true);
  Dict abort{{"rank", 1}, {"code", static_cast<int>(ErrorCode::kInvalidArgument)}, {"message", "rank 1 gives up"},
             {"seq", 0}};
  auto aborted_at = Clock::now();
  (void)c1->send(Value(abort), c1->peer("rank-0"), {}, {.tag = kAbortTag}).wait();
  rank_0.join();
  EXPECT_TRUE(thrown.load());
  if (result.outcome.failed) result.threw_after_abort = std::chrono::duration<double>(threw_at - aborted_at).count();
  to_0.heal();
  c2->close();
  c1->close();
  c0->close();
  return result;
}

TEST(GroupFailure, AFailedCallReturnsOnlyOnceAFrameBeingReadIntoItsTensorHasEnded) {
  AbortMidFrame r = abort_rank_0_mid_frame(/*stall=*/false);
  ASSERT_TRUE(r.outcome.failed);
  EXPECT_EQ(r.outcome.rank, 1) << r.outcome.message;
  EXPECT_EQ(r.outcome.code, static_cast<int>(ErrorCode::kInvalidArgument)) << r.outcome.message;
  EXPECT_EQ(r.changed_after_throw, 0u) << "the output was written after the call threw";
  // The frame claimed the recv_into (it came after it was posted): the call waits for the
  // rest of it (3/4 MiB at 1 MiB/s) before it throws. The stalled variant checks the bound.
  EXPECT_GT(r.threw_after_abort, 0.3);
  EXPECT_LT(r.threw_after_abort, 10.0);
}

TEST(GroupFailure, AFailedCallEndsAStalledFrameBeingReadIntoItsTensorAfterItsBound) {
  // The frame claims rank 0's recv_into (rank 2 sends once rank 0 posted it: recvs_waiting;
  // under load a fixed 200 ms was sometimes too short, and three tries hid it).
  AbortMidFrame r = abort_rank_0_mid_frame(/*stall=*/true);
  ASSERT_TRUE(r.outcome.failed);
  EXPECT_EQ(r.outcome.rank, 1) << r.outcome.message;
  EXPECT_EQ(r.changed_after_throw, 0u) << "the output was written after the call threw";
  // The bound is the call's timeout (2 s); heartbeats would take 6 s.
  EXPECT_GT(r.threw_after_abort, 1.5);
  EXPECT_LT(r.threw_after_abort, 5.5);
}

// A rank process SIGKILLed while every rank loops over 8 MiB allreduces: every other rank's
// call fails well within the (long) timeout, naming rank 2.
TEST(GroupFailure, KilledRankFailsEveryOtherRankWithinTimeout) {
  const int world = 4;
  std::uint16_t port = free_tcp_port();
  std::vector<pid_t> pids(world);
  std::vector<int> reads(world);
  for (int r = 0; r < world; ++r) {
    int fds[2];
    ASSERT_EQ(0, ::pipe(fds));
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      std::string line;
      try {
        auto g = Group::create(local_spec(r, world, port), {.timeout = Seconds(60)});
        std::vector<float> x(2 << 20, 1.0f);
        auto t = Tensor::borrow(x.data(), DType::kFloat32, {2 << 20});
        g->allreduce(t);
        (void)!::write(fds[1], "looping\n", 8);
        for (;;) g->allreduce(t);
      } catch (const CollectiveError& e) {
        line = "failed " + std::to_string(e.rank()) + " " + e.what() + "\n";
      } catch (const std::exception& e) {
        line = std::string("other ") + e.what() + "\n";
      }
      (void)!::write(fds[1], line.data(), line.size());
      // Stay alive (the test kills it): a rank that exits at once could end its connections
      // before its abort reached the others, who would then blame it instead of rank 2.
      for (;;) ::pause();
    }
    ::close(fds[1]);
    pids[r] = pid;
    reads[r] = fds[0];
  }
  auto read_line = [&](int r, int timeout_ms) {
    std::string s;
    char c;
    pollfd p{reads[r], POLLIN, 0};
    while (::poll(&p, 1, timeout_ms) == 1 && ::read(reads[r], &c, 1) == 1 && c != '\n') s += c;
    return s;
  };
  for (int r = 0; r < world; ++r) ASSERT_EQ(read_line(r, 30000), "looping") << "rank " << r;
  auto killed_at = Clock::now();
  ::kill(pids[2], SIGKILL);
  for (int r : {0, 1, 3}) {
    std::string line = read_line(r, 30000);
    double after = std::chrono::duration<double>(Clock::now() - killed_at).count();
    EXPECT_EQ(line.rfind("failed 2 ", 0), 0u) << "rank " << r << ": " << line;
    EXPECT_LT(after, 20.0) << "rank " << r;
  }
  for (int r = 0; r < world; ++r) {
    ::kill(pids[r], SIGKILL);
    ::waitpid(pids[r], nullptr, 0);
    ::close(reads[r]);
  }
}

}  // namespace
}  // namespace wcomm::test
