// A peer's session: its connections, dialing them (each address in turn, with backoff), the
// peer's incarnation (restart detection), its up / down / restarted events, and closing. It
// tells the outbox and the receive side what happened to a connection; they decide what that
// means for their operations. Loop thread, but for stats(), which any thread reads under the
// session's one lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "transport/transport.h"
#include "wcomm/comm.h"

namespace wcomm {

class Connection;
class PeerState;
using Clock = std::chrono::steady_clock;

class PeerSession {
 public:
  PeerSession(Comm::Impl& impl, PeerState& peer);

  // As docs/thread-model.md draws it: idle -> dialing -> up -> draining -> closed, and back
  // to dialing when a connection fails with sends queued. Derived from what the loop holds,
  // so it cannot disagree with it.
  enum class State { kIdle, kDialing, kUp, kDraining, kClosed };
  State state() const;
  static const char* state_name(State s);
  // Any thread: how the peer is reached now.
  PeerStats stats() const;
  // The established connections, any order.
  const std::vector<std::shared_ptr<Connection>>& connections() const { return connections_; }
  bool closing() const { return draining_ || closed_; }  // close_all is completing everything, or did
  const Error& close_error() const { return close_error_; }  // what close_all was given

  void ensure_connection();  // dials unless connected or dialing already
  void add_connection(std::shared_ptr<Connection> connection);  // established (dialed or accepted)
  // refused_tag: the connection ended because this side refused a DATA frame on that tag
  // (FrameReader::refused_tag): error goes to the recv that would have received it.
  void on_connection_lost(Connection& connection, const Error& error, bool local,
                          std::optional<std::uint32_t> refused_tag);
  // Ends every established connection (Comm::drop_connections), as a local failure.
  void drop_connections(const Error& error);
  void close_all(const Error& error);
  void refresh_stats();  // the connection stats() describes: the one sends go to

 private:
  void dial(Clock::time_point deadline, std::chrono::milliseconds backoff, std::size_t address_index);
  void look_again_at_same_host(Clock::time_point deadline, std::chrono::milliseconds backoff, std::size_t address_index,
                               std::unique_ptr<transport::Connection> other);
  void handshake(std::unique_ptr<transport::Connection> stream, Clock::time_point deadline,
                 std::chrono::milliseconds backoff, std::size_t address_index);
  void retry_or_give_up(Clock::time_point deadline, std::chrono::milliseconds backoff, std::size_t address_index,
                        std::error_code ec, const std::string& why);
  void peer_restarted(const std::string& old_incarnation, const std::string& new_incarnation);
  void emit(PeerEvent::Kind kind, const std::string& reason);

  Comm::Impl& impl_;
  PeerState& peer_;
  std::vector<Address> endpoints_;  // where the peer is dialed, in order
  // endpoints_ starts with the peer's same-host name (auto, shm, unix: same_host.h) and has
  // more; it was refused in this round of dialing (see look_again_at_same_host).
  bool same_host_first_ = false;
  bool same_host_refused_ = false;
  // Since when every dial in a row was refused (none: the last was not), for the fast failure.
  std::optional<Clock::time_point> refused_since_;
  std::string incarnation_;  // the peer's, as its last handshake said
  bool dialing_ = false;     // a dial (connect and handshake, or the pause between tries) is on
  std::optional<asio::steady_timer> backoff_timer_;
  std::shared_ptr<transport::PendingDial> pending_dial_;
  std::vector<std::shared_ptr<Connection>> connections_;
  mutable std::mutex stats_mutex_;
  std::shared_ptr<Connection> stats_connection_;  // under stats_mutex_
  bool draining_ = false;
  bool closed_ = false;
  Error close_error_{ErrorCode::kClosed, "the Comm is closed"};
};

}  // namespace wcomm
