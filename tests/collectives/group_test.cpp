// Every collective x dtype x op against references computed here, in worlds of 1..5 ranks
// (threads, each with its own Comm on loopback, joined by a real rendezvous), with sizes that
// are odd, smaller than the world and not divisible by it.
#include <gtest/gtest.h>

#include <cstring>

#include "values.h"
#include "world.h"

namespace wcomm::test {
namespace {

class GroupWorld : public ::testing::TestWithParam<int> {};

Tensor tensor_of(DType dtype, std::vector<std::uint8_t>& bytes) {
  return Tensor::borrow(bytes.data(), dtype, {static_cast<std::int64_t>(bytes.size() / dtype_itemsize(dtype))});
}

// A small segment size, so that the ring and the broadcast pipeline across many segments.
GroupOptions pipelined() {
  GroupOptions o;
  o.segment_bytes = 4096;
  o.small_allreduce_bytes = 2048;
  o.timeout = Seconds(30);
  return o;
}

TEST_P(GroupWorld, AllreduceEveryDtypeOpSizeAndAlgorithm) {
  const int world = GetParam();
  run_world(world, [&](Group& g) {
    for (DType dtype : kDTypes)
      for (ReduceOp op : kOps)
        for (std::size_t n : {1u, 2u, 7u, 1001u, 20011u})
          for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling}) {
            if (a == Algorithm::kRecursiveDoubling && n > 2000) continue;
            auto data = make_data(dtype, g.rank(), n);
            g.allreduce(tensor_of(dtype, data), op, {.algorithm = a});
            std::string why;
            ASSERT_TRUE(matches_reference(dtype, op, world, 0, n, data.data(), &why))
                << "rank " << g.rank() << " " << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n
                << " " << algorithm_name(a) << ": " << why;
          }
  }, pipelined());
}

TEST_P(GroupWorld, ReduceScatterEveryDtypeAndOp) {
  const int world = GetParam();
  run_world(world, [&](Group& g) {
    for (DType dtype : kDTypes)
      for (ReduceOp op : kOps)
        for (std::size_t n : {3u, 1001u, 9001u}) {
          auto data = make_data(dtype, g.rank(), n);
          auto before = data;
          std::size_t begin = g.rank() * (n / world) + std::min<std::size_t>(g.rank(), n % world);
          std::size_t len = n / world + (static_cast<std::size_t>(g.rank()) < n % world ? 1 : 0);
          std::vector<std::uint8_t> out(len * dtype_itemsize(dtype));
          g.reduce_scatter(tensor_of(dtype, data), tensor_of(dtype, out), op);
          std::string why;
          ASSERT_TRUE(matches_reference(dtype, op, world, begin, begin + len, out.data(), &why))
              << "rank " << g.rank() << " " << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n << ": " << why;
          ASSERT_EQ(data, before) << "reduce_scatter modified its input";
        }
  }, pipelined());
}

TEST_P(GroupWorld, BroadcastFromEveryRootAndAllgather) {
  const int world = GetParam();
  run_world(world, [&](Group& g) {
    for (DType dtype : kDTypes)
      for (std::size_t n : {1u, 999u, 30001u}) {
        for (int root = 0; root < world; ++root) {
          auto data = make_data(dtype, g.rank(), n);
          g.broadcast(tensor_of(dtype, data), root);
          ASSERT_EQ(data, make_data(dtype, root, n)) << "rank " << g.rank() << " root " << root << " n=" << n;
        }
        auto mine = make_data(dtype, g.rank(), n);
        std::vector<std::uint8_t> all(mine.size() * world, 0xEE);
        g.allgather(tensor_of(dtype, mine), tensor_of(dtype, all));
        for (int r = 0; r < world; ++r) {
          auto expect = make_data(dtype, r, n);
          ASSERT_EQ(0, std::memcmp(all.data() + r * mine.size(), expect.data(), mine.size()))
              << "rank " << g.rank() << " slot " << r << " n=" << n;
        }
      }
    for (int i = 0; i < 10; ++i) g.barrier();
  }, pipelined());
}

TEST_P(GroupWorld, SendAndRecvByRank) {
  const int world = GetParam();
  if (world < 2) GTEST_SKIP() << "needs two ranks";
  run_world(world, [&](Group& g) {
    // Each rank sends to the next and receives from the previous, on two tags, out of order.
    int next = (g.rank() + 1) % world, prev = (g.rank() + world - 1) % world;
    std::vector<std::int32_t> a(100, g.rank()), b(50, g.rank() * 10), ra(100), rb(50);
    std::thread sender([&] {
      g.send(Tensor::borrow(b.data(), DType::kInt32, {50}), next, 2);
      g.send(Tensor::borrow(a.data(), DType::kInt32, {100}), next, 1);
    });
    g.recv(Tensor::borrow(ra.data(), DType::kInt32, {100}), prev, 1);
    g.recv(Tensor::borrow(rb.data(), DType::kInt32, {50}), prev, 2);
    sender.join();
    EXPECT_EQ(ra, std::vector<std::int32_t>(100, prev));
    EXPECT_EQ(rb, std::vector<std::int32_t>(50, prev * 10));
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, GroupWorld, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(Group, AlgorithmIsChosenBySize) {
  run_world(1, [](Group& g) {
    EXPECT_EQ(g.allreduce_algorithm(1024), Algorithm::kRecursiveDoubling);
    EXPECT_EQ(g.allreduce_algorithm(64 << 20), Algorithm::kRing);
    EXPECT_EQ(g.allreduce_algorithm(1024, Algorithm::kRing), Algorithm::kRing);
  });
}

TEST(Group, ArgumentsCheckedLocally) {
  run_world(2, [](Group& g) {
    std::vector<float> x(10), y(7);
    auto tx = Tensor::borrow(x.data(), DType::kFloat32, {10});
    auto ty = Tensor::borrow(y.data(), DType::kFloat32, {7});
    EXPECT_THROW(g.broadcast(tx, 2), InvalidArgumentError);
    EXPECT_THROW(g.broadcast(tx, -1), InvalidArgumentError);
    EXPECT_THROW(g.allgather(tx, ty), InvalidArgumentError);
    EXPECT_THROW(g.send(tx, g.rank()), InvalidArgumentError);
    EXPECT_THROW(g.send(tx, 5), InvalidArgumentError);
    std::vector<std::int16_t> s(4);
    EXPECT_THROW(g.allreduce(Tensor::borrow(s.data(), DType::kInt16, {4})), InvalidArgumentError);
  });
}

}  // namespace
}  // namespace wcomm::test

namespace wcomm::test {
namespace {

// Back-to-back large allreduces (default segments, same-host sockets) stay exact.
TEST(Group, RepeatedLargeAllreducesStayExact) {
  run_world(4, [](Group& g) {
    for (int i = 0; i < 30; ++i) {
      std::vector<std::int64_t> big(300000, g.rank() + i);
      g.allreduce(Tensor::borrow(big.data(), DType::kInt64, {300000}), ReduceOp::kMax);
      for (std::size_t k = 0; k < big.size(); ++k)
        ASSERT_EQ(big[k], 3 + i) << "iteration " << i << " element " << k << " rank " << g.rank() << " copied " << g.comm()->stats().bytes_copied;
      std::vector<float> x(1001, 1.0f);
      g.allreduce(Tensor::borrow(x.data(), DType::kFloat32, {1001}));
      ASSERT_EQ(x[1000], 4.0f);
    }
  });
}

}  // namespace
}  // namespace wcomm::test

namespace wcomm::test {
namespace {

// Ranks on one host reach each other through Comm's same-host transport (shared memory with
// the default `auto`), or, with WCOMM_SAME_HOST=unix, at the rendezvous' Unix sockets.
TEST(Group, SameHostRanksSkipTcp) {
  const char* mode = std::getenv("WCOMM_SAME_HOST");
  const bool unix_mode = mode && std::string(mode) == "unix";
  run_world(2, [&](Group& g) {
    std::vector<float> x(100000, 1.0f);
    g.allreduce(Tensor::borrow(x.data(), DType::kFloat32, {100000}));
    EXPECT_EQ(x[99999], 2.0f);
    const std::string other = g.rank() == 0 ? "rank-1" : "rank-0";
    if (unix_mode) {
      EXPECT_EQ(g.comm()->peer(other).endpoints().at(0).scheme, "unix");
    } else {
      EXPECT_EQ(g.comm()->stats().peers.at(other).transport, "shm");
    }
  });
}

}  // namespace
}  // namespace wcomm::test
