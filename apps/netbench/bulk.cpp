// Pipelined bulk sends and counting receives for the throughput phases.
#include "netbench/bulk.h"

#include <cstring>
#include <deque>

#include "netbench/protocol.h"

namespace wcomm::bench {

Bytes ZeroPayloads::bytes(std::size_t size) {
  if (zeros_.size() < size || zeros_.owner() == nullptr) {
    zeros_ = Buffer::allocate(std::max<std::size_t>(size, 1));
    std::memset(zeros_.data(), 0, zeros_.size());
  }
  return Bytes(Buffer::share(zeros_.owner(), zeros_.data(), size));
}

void send_bulk(Comm& comm, const Peer& peer, ZeroPayloads& zeros, std::uint32_t tag, std::size_t size,
               std::uint64_t count, Seconds timeout, SendWindow window) {
  const Bytes payload = zeros.bytes(size);
  // A frame's bytes beyond the payload (header + manifest) are a few dozen; count the payload
  // plus a small allowance so tiny messages are bounded by the message window, not bytes.
  const std::uint64_t frame_bytes = size + 64;
  std::deque<Future<SendResult>> in_flight;
  std::uint64_t in_flight_bytes = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    // At least two in flight whatever their size, so the next frame is queued before the
    // current one finishes and the connection never idles between them.
    while (in_flight.size() >= 2 &&
           (in_flight.size() >= window.max_messages || in_flight_bytes + frame_bytes > window.max_bytes)) {
      in_flight.front().get();
      in_flight.pop_front();
      in_flight_bytes -= frame_bytes;
    }
    // Never compressed: the zero-filled payloads would measure the compressor, not the link.
    in_flight.push_back(
        comm.send(Value(payload), peer, Value(), {.tag = tag, .timeout = timeout, .compress = Compression::kOff}));
    in_flight_bytes += frame_bytes;
  }
  while (!in_flight.empty()) {
    in_flight.front().get();
    in_flight.pop_front();
  }
}

BulkReceiver::BulkReceiver(Comm& comm, const Peer& peer, std::uint32_t tag, std::size_t expected_size,
                           std::uint64_t count, Seconds timeout, std::uint64_t window)
    : comm_(comm),
      peer_(peer),
      tag_(tag),
      expected_size_(expected_size),
      count_(count),
      timeout_(timeout),
      window_(std::max<std::uint64_t>(window, 1)),
      state_(std::make_shared<State>()) {
  post(std::min(count_, window_));
}

void BulkReceiver::post(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i, ++posted_) {
    // The callback owns the state (the receiver may be gone when a late one fires), and the
    // future is dropped at once, so a received payload is freed as soon as it is counted.
    comm_.recv(peer_, {.tag = tag_, .timeout = timeout_})
        .then([state = state_, expected_size = expected_size_](Result<Received> got) {
          std::optional<std::string> problem;
          if (got.ok()) {
            const Value& v = got.value().value;
            if (!v.is<Bytes>() || v.as<Bytes>().size() != expected_size)
              problem = "bulk message is " + summarize(v) + ", expected " + std::to_string(expected_size) + " bytes";
          }
          {
            std::lock_guard lock(state->mu);
            if (!got.ok() && !state->error) state->error = got.error();
            if (problem && !state->problem) state->problem = std::move(problem);
            ++state->finished;
          }
          state->cv.notify_all();
        });
  }
}

void BulkReceiver::wait() {
  for (;;) {
    std::uint64_t finished = 0;
    {
      std::unique_lock lock(state_->mu);
      // Wakes when the window has room for a refill, when all are in, or on a failure. Every
      // posted receive has its own timeout, so this wait ends.
      const std::uint64_t refill_at = posted_ < count_ ? posted_ - window_ / 2 : count_;
      state_->cv.wait(lock, [&] { return state_->finished >= refill_at || state_->error || state_->problem; });
      if (state_->error) throw_error(*state_->error);
      if (state_->problem) throw BenchProtocolError("benchmark protocol: " + *state_->problem);
      finished = state_->finished;
    }
    if (finished == count_) return;
    // Top the window up again (outside the lock: recv() may complete inline on this thread).
    post(std::min(count_ - posted_, window_ - (posted_ - finished)));
  }
}

}  // namespace wcomm::bench
