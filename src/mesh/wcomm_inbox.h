// The wcomm transport's receiving side: an inbox the owner drains, filled by Comm recv
// callbacks on Comm's loop thread (one recv outstanding per peer), with an eventfd the
// owner's waits poll.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "wcomm/comm.h"
#include "wcomm_batch.h"

namespace wcomm::mesh {

// What the loop thread's recv callbacks share with the owner; outlives the communicator
// while a callback may still run.
struct Inbox {
  std::string my_id;
  std::mutex mu;
  std::deque<std::string> messages;     // under mu
  std::vector<const Peer*> parked;      // under mu: peers not read while the inbox is full
  bool closed = false;                  // under mu
  std::size_t max_messages = 0;
  int fd = -1;                          // eventfd: readable while messages is not empty

  ~Inbox() {
    if (fd >= 0) ::close(fd);
  }
  void signal() {
    const std::uint64_t one = 1;
    while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
  void reset_signal() {
    std::uint64_t count;
    while (::read(fd, &count, sizeof count) < 0 && errno == EINTR) {
    }
  }
};

// Posts the recv of peer's next message; its completion files it and posts the next one.
inline void arm_recv(const std::shared_ptr<Comm>& comm, const std::shared_ptr<Inbox>& inbox, const Peer& peer) {
  std::weak_ptr<Comm> weak_comm = comm;
  comm->recv(peer).then([weak_comm, inbox, peer = &peer](Result<Received> got) {
    {
      std::lock_guard lock(inbox->mu);
      if (inbox->closed) return;
      if (got.ok()) {
        if (const Bytes* b = got.value().value.get_if<Bytes>()) {
          if (inbox->messages.empty()) inbox->signal();
          try {
            batch_for_each(b->view(), [&](std::string_view m) { inbox->messages.emplace_back(m); });
          } catch (const SerializationError& e) {
            spdlog::error("mesh entity '{}': dropped the rest of a batch from '{}': {}", inbox->my_id, peer->node_id,
                          e.what());
          }
        } else {
          spdlog::error("mesh entity '{}': dropped a message from '{}' that is not a mesh message (bytes): {}",
                        inbox->my_id, peer->node_id, summarize(got.value().value));
        }
        if (inbox->messages.size() >= inbox->max_messages) {
          inbox->parked.push_back(peer);  // read again once the owner drains
          return;
        }
      } else if (got.error().code == ErrorCode::kClosed) {
        return;
      } else if (got.error().code == ErrorCode::kConnectionClosed) {
        // A peer that exits or restarts: routine in a mesh; the next recv waits for it.
        spdlog::debug("mesh entity '{}': '{}' went away: {}", inbox->my_id, peer->node_id, got.error().message);
      } else {
        spdlog::warn("mesh entity '{}': receiving from '{}': {}", inbox->my_id, peer->node_id, got.error().message);
      }
    }
    if (auto comm = weak_comm.lock()) arm_recv(comm, inbox, *peer);
  });
}


}  // namespace wcomm::mesh
