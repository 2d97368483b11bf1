// Allreduce (sum, float32) and barrier timings of wcomm::Group with N rank processes on this
// host, measured like bench/collectives_vs_gloo.py measures gloo (barrier, then one timed call;
// p50 over the rounds on rank 0); and the reduction kernel against a one-thread memcpy.
// Usage: collectives_allreduce [ranks=4] [rounds=10] [sizes in bytes, comma-separated]
// WCOMM_BENCH_RANKS_PER_PROCESS=2 runs the ranks as threads, that many to a process: the
// layout of `wcomm multirank --ranks-per-host 2` (bench/multirank_vs_group.py's fair reference).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <sstream>
#include <thread>

#include "bench_common.h"
#include "wcomm/collectives/group.h"

using namespace wcomm;
using wcomm::bench_programs::Clock;
using wcomm::bench_programs::die;
using wcomm::bench_programs::free_port;

namespace {

double p50(std::vector<double> v) { return wcomm::bench_programs::percentile(std::move(v), 50); }

void rank_main(int rank, int world, std::uint16_t port, int rounds, const std::vector<std::size_t>& sizes) {
  RendezvousSpec spec;
  spec.rank = rank;
  spec.world = world;
  spec.master_addr = "127.0.0.1";
  spec.master_port = port;
  spec.bind_host = "127.0.0.1";
  // WCOMM_BENCH_TRANSPORT=tcp measures over TCP like gloo; default: Comm's auto (shared memory
  // between ranks on one host).
  if (const char* t = std::getenv("WCOMM_BENCH_TRANSPORT")) spec.comm.transport = t;
  GroupOptions options;
  if (const char* seg = std::getenv("WCOMM_SEGMENT_BYTES")) options.segment_bytes = std::stoull(seg);  // tuning
  if (const char* small = std::getenv("WCOMM_SMALL_ALLREDUCE_BYTES")) options.small_allreduce_bytes = std::stoull(small);
  auto g = Group::create(spec, options);
  for (std::size_t bytes : sizes) {
    Tensor t = Tensor::empty(DType::kFloat32, {static_cast<std::int64_t>(bytes / 4)});
    float* p = t.data_as<float>();
    for (std::size_t i = 0; i < bytes / 4; ++i) p[i] = 1.0f;
    g->allreduce(t);
    std::vector<double> ms;
    for (int r = 0; r < rounds; ++r) {
      g->barrier();
      auto s = Clock::now();
      g->allreduce(t);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    }
    if (rank == 0)
      std::printf("wcomm allreduce world=%d bytes=%zu algorithm=%s transport=%s p50_ms=%.2f\n", world, bytes,
                  std::string(algorithm_name(g->allreduce_algorithm(bytes))).c_str(),
                  g->comm()->stats().peers.at("rank-1").transport.c_str(), p50(ms));
  }
  std::vector<double> us;
  for (int r = 0; r < 20 * rounds; ++r) {
    auto s = Clock::now();
    g->barrier();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }
  if (rank == 0) std::printf("wcomm barrier world=%d p50_us=%.1f\n", world, p50(us));
  g->barrier();
}

// GB/s of dst += src over 64 MiB float32 (reads 2, writes 1 buffer) and of a one-thread
// memcpy of 64 MiB (reads 1, writes 1), both counted as bytes of the destination per second.
void kernel_bench() {
  const std::size_t n = (64u << 20) / 4;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n);
  auto best = [](auto fn) {
    double best_s = 1e9;
    for (int i = 0; i < 7; ++i) {
      auto s = Clock::now();
      fn();
      best_s = std::min(best_s, std::chrono::duration<double>(Clock::now() - s).count());
    }
    return (64.0 * (1 << 20)) / best_s / 1e9;
  };
  double sum = best([&] { reduce_into(a.data(), b.data(), n, DType::kFloat32, ReduceOp::kSum); });
  double copy = best([&] { std::memcpy(c.data(), b.data(), n * 4); });
  // The half-precision kernels widen to float, add and round back (same buffers, as 16-bit values).
  double bf16 = best([&] { reduce_into(a.data(), b.data(), n * 2, DType::kBFloat16, ReduceOp::kSum); });
  double f16 = best([&] { reduce_into(a.data(), b.data(), n * 2, DType::kFloat16, ReduceOp::kSum); });
  std::printf(
      "kernel sum float32 64MiB GB/s=%.2f memcpy_1thread GB/s=%.2f ratio=%.2f (bfloat16 sum GB/s=%.2f, float16 sum "
      "GB/s=%.2f)\n",
      sum, copy, sum / copy, bf16, f16);
}

}  // namespace

int main(int argc, char** argv) {
  int world = argc > 1 ? std::atoi(argv[1]) : 4;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  std::vector<std::size_t> sizes = {1u << 20, 64u << 20};
  if (argc > 3) {
    sizes.clear();
    std::stringstream ss(argv[3]);
    for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoull(item));
  }
  kernel_bench();
  std::fflush(stdout);
  std::uint16_t port = free_port();
  const char* per_process_text = std::getenv("WCOMM_BENCH_RANKS_PER_PROCESS");
  const int per_process = per_process_text ? std::max(1, std::atoi(per_process_text)) : 1;
  if (world % per_process != 0) die("WCOMM_BENCH_RANKS_PER_PROCESS must divide the number of ranks");
  std::vector<pid_t> pids;
  for (int first = 0; first < world; first += per_process) {
    pid_t pid = ::fork();
    if (pid == 0) {
      std::atomic<int> failed{0};
      std::vector<std::thread> ranks;
      for (int r = first; r < first + per_process; ++r)
        ranks.emplace_back([&, r] {
          try {
            rank_main(r, world, port, rounds, sizes);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: %s\n", r, e.what());
            failed = 1;
          }
        });
      for (auto& t : ranks) t.join();
      std::fflush(stdout);
      ::_exit(failed.load());
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed ? 1 : 0;
}
