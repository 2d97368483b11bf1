// The reference for one-copy transfers: a one-thread memcpy between two pre-faulted buffers,
// median of `repeat` copies. Usage: memcpy_bw [bytes (default 64 MiB)] [repeat (default 20)]
#include <cstring>
#include <vector>

#include "bench_common.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::uint64_t bytes = arg_or(argc, argv, 1, 64ull << 20);
  const std::uint64_t repeat = arg_or(argc, argv, 2, 20);
  std::vector<char> from(bytes, 1), to(bytes, 2);  // both written once: no page faults below
  std::vector<double> gb_s;
  for (std::uint64_t i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    const double us = micros_between(start, Clock::now());
    gb_s.push_back(double(bytes) / us / 1e3);
    from[i % bytes] = static_cast<char>(to[(i * 7) % bytes]);  // keeps the copies observable
  }
  std::printf("{\"what\": \"memcpy\", \"bytes\": %llu, \"gb_s\": %.3f}\n", static_cast<unsigned long long>(bytes),
              percentile(gb_s, 50));
}
