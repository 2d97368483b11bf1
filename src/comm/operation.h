// What every Comm operation is (a send, recv, recv_into or recv_for): its peer and tag, its
// deadline as data (none: max; the peer's one timer ends it there, whoever works on it:
// deadlines.h), and the Comm it belongs to. Its kind adds the rest: OutMessage (outbox.h), whose sink is a promise,
// and RecvWaiter (comm_impl.h), whose sink is a promise or a slot on the stack of the thread
// that reads for it; each kind completes in one function (Outbox::complete,
// PeerState::complete_recv), exactly once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "core/operation.h"
#include "wcomm/comm.h"

namespace wcomm {

class PeerState;
struct CommOperation;
// Deadlines of operations, earliest first (DeadlineList).
using DeadlineEntries = std::multimap<std::chrono::steady_clock::time_point, CommOperation*>;

struct CommOperation : detail::Operation {
  PeerState* peer = nullptr;
  std::uint32_t tag = 0;
  std::optional<Seconds> timeout;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  DeadlineEntries::iterator deadline_entry;  // in its side's DeadlineList, while kept there
  bool has_deadline_entry = false;
  std::weak_ptr<Comm::Impl> comm;
};

}  // namespace wcomm
