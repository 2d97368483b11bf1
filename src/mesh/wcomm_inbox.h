// The wcomm transport's receiving side, all on the owner's thread: one Comm recv outstanding
// per peer, and the owner's waits read the peers' connections themselves (Comm::wait_any), so
// an arriving message wakes the owner alone rather than Comm's loop thread and then the owner.
// What the recvs bring is filed in order, per peer as sent.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wcomm/comm.h"

namespace wcomm::mesh {

class Inbox {
 public:
  // Reads every peer of comm, holding up to max_messages (then those peers wait, pushed back).
  Inbox(std::shared_ptr<Comm> comm, std::string my_id, std::size_t max_messages);

  // Files what the recvs have brought, reading what has arrived on their connections first.
  void collect();
  // Waits until a message is filed, fd (if >= 0) is readable, or timeout passes.
  void wait(std::optional<Seconds> timeout, int fd);
  bool empty() const { return messages_.empty(); }
  // Every filed message; peers held back by the bound are read again.
  std::vector<std::string> take_all();

 private:
  struct Source {
    const Peer* peer;
    Future<Received> recv;  // none (invalid) while the bound holds the peer back, or once closed
    bool held = false;      // held back by the bound
  };
  void file_ready();
  void file(Source& source, Result<Received>& got);

  std::shared_ptr<Comm> comm_;
  std::string my_id_;
  std::size_t max_messages_;
  std::vector<Source> sources_;
  std::deque<std::string> messages_;
  std::vector<Future<Received>> waiting_;  // wait()'s list, kept between calls
};

}  // namespace wcomm::mesh
