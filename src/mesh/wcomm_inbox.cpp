#include "wcomm_inbox.h"

#include <spdlog/spdlog.h>

#include "wcomm/errors.h"

#include "wcomm_batch.h"

namespace wcomm::mesh {

Inbox::Inbox(std::shared_ptr<Comm> comm, std::string my_id, std::size_t max_messages)
    : comm_(std::move(comm)), my_id_(std::move(my_id)), max_messages_(std::max<std::size_t>(1, max_messages)) {
  for (const Peer& p : comm_->peers()) {
    const Peer& peer = comm_->peer(p.node_id);
    sources_.push_back({&peer, comm_->recv(peer)});
  }
}

void Inbox::collect() {
  // A zero wait reads what has arrived (the loop may be standing down after our last wait).
  wait(Seconds(0), -1);
}

void Inbox::wait(std::optional<Seconds> timeout, int fd) {
  file_ready();
  if (!messages_.empty()) return;
  waiting_.clear();
  for (const Source& s : sources_)
    if (s.recv.valid()) waiting_.push_back(s.recv);
  if (waiting_.empty() && fd < 0 && !timeout) {  // nothing could ever end the wait
    if (sources_.empty())
      throw InvalidArgumentError("mesh entity '" + my_id_ +
                                 "' has no peers to receive from: a blocking get without a timeout would never end");
    throw ClosedError("the mesh communicator is closed");
  }
  comm_->wait_any(waiting_, timeout, fd);
  file_ready();
}

std::vector<std::string> Inbox::take_all() {
  std::vector<std::string> out(std::make_move_iterator(messages_.begin()), std::make_move_iterator(messages_.end()));
  messages_.clear();
  for (Source& s : sources_) {
    if (!s.held) continue;
    s.held = false;
    s.recv = comm_->recv(*s.peer);
  }
  return out;
}

void Inbox::file_ready() {
  // Each ready recv is filed and the next one posted (it may be ready at once: Comm holds what
  // it read meanwhile), one per peer a round, so that a busy peer cannot keep the others out
  // of a bounded inbox, until the bound holds the peers back. After an error the next recv
  // waits for the next look, so a peer that keeps failing cannot keep us here.
  for (bool filed = true; filed;) {
    filed = false;
    for (Source& s : sources_) {
      if (!s.recv.valid() || !s.recv.ready()) continue;
      Result<Received> got = std::move(s.recv.wait());
      s.recv = {};
      const bool ok = got.ok();
      file(s, got);
      if (s.held || (!ok && got.error().code == ErrorCode::kClosed)) continue;
      s.recv = comm_->recv(*s.peer);
      filed = filed || ok;
    }
  }
}

void Inbox::file(Source& source, Result<Received>& got) {
  const std::string& from = source.peer->node_id;
  if (got.ok()) {
    if (const Bytes* b = got.value().value.get_if<Bytes>()) {
      try {
        batch_for_each(b->view(), [&](std::string_view m) { messages_.emplace_back(m); });
      } catch (const SerializationError& e) {
        spdlog::error("mesh entity '{}': dropped the rest of a batch from '{}': {}", my_id_, from, e.what());
      }
    } else {
      spdlog::error("mesh entity '{}': dropped a message from '{}' that is not a mesh message (bytes): {}", my_id_,
                    from, summarize(got.value().value));
    }
    source.held = messages_.size() >= max_messages_;  // read again once the owner drains
  } else if (got.error().code == ErrorCode::kConnectionClosed) {
    // A peer that exits or restarts: routine in a mesh; the next recv waits for it.
    spdlog::debug("mesh entity '{}': '{}' went away: {}", my_id_, from, got.error().message);
  } else if (got.error().code != ErrorCode::kClosed) {
    spdlog::warn("mesh entity '{}': receiving from '{}': {}", my_id_, from, got.error().message);
  }
}

}  // namespace wcomm::mesh
