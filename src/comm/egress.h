// Egress pacing pieces: the token bucket of the egress scheduler (egress_scheduler.h), a
// link's measured drain rate, and slicing a gather list.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <asio.hpp>

namespace wcomm {

class EgressPacer {
 public:
  using Clock = std::chrono::steady_clock;
  EgressPacer(double rate_bytes_per_second, std::uint64_t burst_bytes)
      : rate_(rate_bytes_per_second), burst_(static_cast<double>(burst_bytes)), tokens_(burst_), last_(Clock::now()) {}

  bool enabled() const { return rate_ > 0; }

  // How long to wait before `bytes` may be written (zero: now).
  Clock::duration delay_for(std::uint64_t bytes) {
    refill();
    double missing = static_cast<double>(bytes) - tokens_;
    if (missing <= 0) return Clock::duration::zero();
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(missing / rate_));
  }
  void consume(std::uint64_t bytes) {
    refill();
    tokens_ -= static_cast<double>(bytes);
  }
  // A writer waited for tokens and its timer fired late: what accrued meanwhile, up to
  // `slack` bytes past the burst, is kept (else every late wake-up would lower the rate).
  void refill_after_wait(std::uint64_t slack) { refill(burst_ + static_cast<double>(slack)); }

 private:
  void refill() { refill(burst_); }
  void refill(double cap) {
    auto now = Clock::now();
    // Only the growth is capped: tokens kept by refill_after_wait stay until used.
    if (tokens_ < cap) tokens_ = std::min(cap, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }
  double rate_, burst_, tokens_;
  Clock::time_point last_;
};

// A link's drain rate for bulk writes, measured: each chunk's wire bytes over the time from
// asking to write it until the kernel took it (grants and a full socket included), smoothed.
struct LinkRate {
  double bytes_per_second = 0;  // 0: not measured yet
  void sample(std::uint64_t bytes, std::chrono::steady_clock::duration took) {
    const double s = std::chrono::duration<double>(took).count();
    if (bytes == 0 || s <= 0) return;
    const double rate = static_cast<double>(bytes) / s;
    bytes_per_second = bytes_per_second == 0 ? rate : 0.7 * bytes_per_second + 0.3 * rate;
  }
};

// The next at-most-`limit` bytes of a gather list (const or mutable buffers), starting
// `offset` bytes in.
template <typename BufferT>
std::vector<BufferT> slice_buffers(const std::vector<BufferT>& all, std::uint64_t offset, std::uint64_t limit) {
  std::vector<BufferT> out;
  for (const auto& b : all) {
    if (limit == 0) break;
    if (offset >= b.size()) {
      offset -= b.size();
      continue;
    }
    std::uint64_t take = std::min<std::uint64_t>(b.size() - offset, limit);
    out.emplace_back(static_cast<char*>(const_cast<void*>(static_cast<const void*>(b.data()))) + offset, take);
    offset = 0;
    limit -= take;
  }
  return out;
}

}  // namespace wcomm
