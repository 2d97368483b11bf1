// The wcomm transport's sending side for one peer: at most one Comm send in flight, batches
// behind it, the high-water mark over both.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "wcomm/comm.h"
#include "wcomm_batch.h"

namespace wcomm::mesh {

// One peer's outgoing side, shared with the loop thread's send completions: at most one Comm
// send in flight; what comes meanwhile waits in `batch` and leaves, as one Comm message, when
// that send completes. The high-water mark counts both.
struct PeerOut {
  static constexpr std::size_t kMaxBatchBytes = 64u << 20;  // well under Comm's message limit

  std::string id;
  const Peer* peer = nullptr;
  std::size_t hwm = 1;
  std::weak_ptr<Comm> comm;
  std::mutex mu;
  std::condition_variable room;  // a blocked send waits here
  std::string batch;             // under mu
  std::size_t batch_count = 0;   // under mu
  std::size_t in_flight = 0;     // under mu: messages in the Comm send in flight
  bool closed = false;           // under mu

  bool full_locked(std::size_t extra_bytes) const {
    return batch_count + in_flight >= hwm || (batch_count > 0 && batch.size() + extra_bytes > kMaxBatchBytes);
  }
  bool has_room() {
    std::lock_guard lock(mu);
    return !full_locked(0);
  }

  // Sends data now, or queues it behind the send in flight. Caller holds `lock`; it is released.
  void enqueue(std::unique_lock<std::mutex>& lock, std::string_view data, const std::shared_ptr<PeerOut>& self) {
    if (in_flight > 0) {
      batch_append(batch, data);
      batch_count += 1;
      return;
    }
    std::string one;
    one.reserve(data.size() + 4);
    batch_append(one, data);
    in_flight = 1;
    lock.unlock();
    post(std::move(one), 1, self);
  }

  // Loop thread or owner: one Comm send of a batch; its completion sends the next batch. A
  // send Comm wrote at once (the socket had room) completes here, with no callback: a
  // callback would wake the loop thread for every message.
  static void post(std::string packed, std::size_t count, const std::shared_ptr<PeerOut>& self) {
    while (true) {
      auto comm = self->comm.lock();
      if (!comm) return;
      auto owned = std::make_shared<std::string>(std::move(packed));
      Bytes bytes(Buffer::share(owned, owned->data(), owned->size()));
      Future<SendResult> sent = comm->send(Value(std::move(bytes)), *self->peer);
      if (!sent.ready()) {
        sent.then([self, count](Result<SendResult> r) {
          std::string next;
          if (std::size_t next_count = self->completed(r, count, next)) post(std::move(next), next_count, self);
        });
        return;
      }
      count = self->completed(sent.wait(), count, packed);
      if (!count) return;
    }
  }

  // A send is done: takes the batch that waited for it into `next`; its message count (0: none).
  std::size_t completed(const Result<SendResult>& r, std::size_t count, std::string& next) {
    if (!r.ok() && r.error().code != ErrorCode::kClosed)
      spdlog::error("mesh: {} message(s) to '{}' were lost: {}", count, id, r.error().message);
    std::size_t next_count = 0;
    {
      std::lock_guard lock(mu);
      if (closed || batch_count == 0) {
        in_flight = 0;
      } else {
        next.clear();
        next.swap(batch);
        next_count = batch_count;
        batch_count = 0;
        in_flight = next_count;
      }
    }
    room.notify_all();
    return next_count;
  }
};


}  // namespace wcomm::mesh
