// Comm::wait_any: one thread waiting for the next message from any of several peers, reading
// their connections itself (ReadOwner::read_any) as a thread blocked in one recv does.
#include <string>

#include "comm/comm_impl.h"
#include "core/operation.h"

namespace wcomm {

std::optional<std::size_t> Comm::wait_any(std::span<const Future<Received>> recvs, std::optional<Seconds> timeout,
                                          int fd) {
  const auto first_ready = [&]() -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < recvs.size(); ++i)
      if (recvs[i].ready()) return i;
    return std::nullopt;
  };
  if (recvs.empty() && fd < 0 && !timeout)
    throw InvalidArgumentError("wait_any: no recvs, no descriptor and no timeout: it would wait forever");
  const Clock::time_point deadline = deadline_of(timeout);  // (saturating: no overflow)
  std::vector<std::shared_ptr<RecvWaiter>> waiters;          // held while this thread reads for them
  std::vector<std::shared_ptr<Connection>> connections;      // likewise
  std::vector<ReadOwner::Part> parts;
  // (However this returns: see Impl::let_go.)
  struct LetGo {
    Comm::Impl& impl;
    std::vector<std::shared_ptr<Connection>>& connections;
    ~LetGo() {
      for (auto& c : connections) impl.let_go(std::move(c));
    }
  } let_go{*impl_, connections};
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    if (!recvs[i].valid()) throw InvalidArgumentError("wait_any: recv " + std::to_string(i) + " is an empty Future");
    auto operation = detail::PromiseAccess::operation(recvs[i]);
    auto waiter = std::dynamic_pointer_cast<RecvWaiter>(operation);
    if (!operation && recvs[i].ready()) return first_ready();  // done: its operation is dropped then
    if (!waiter || waiter->comm.lock() != impl_)
      throw InvalidArgumentError("wait_any: recv " + std::to_string(i) + " is not a recv of this Comm");
    // Every recv is read where it waits (RecvWaiter::help), but on a closed Comm.
    auto connection = !impl_->closed.load() ? waiter->peer->connection_to_help(*waiter) : nullptr;
    parts.push_back({connection ? &connection->reader_owner() : nullptr, &*waiter->promise});
    waiters.push_back(std::move(waiter));
    connections.push_back(std::move(connection));
  }
  if (auto ready = first_ready()) return ready;
  ReadOwner::read_any(parts, deadline, fd, std::chrono::microseconds(impl_->spec.comm.recv_busy_poll_us));
  return first_ready();
}

}  // namespace wcomm
