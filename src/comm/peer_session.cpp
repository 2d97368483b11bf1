// PeerSession (peer_session.h): dialing with backoff, connections coming and going, the
// peer's incarnation, closing.
#include "comm/peer_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "comm/comm_impl.h"
#include "comm/same_host.h"

namespace wcomm {

PeerSession::PeerSession(Comm::Impl& impl, PeerState& peer) : impl_(impl), peer_(peer) {
  const Peer& p = peer.peer();
  endpoints_ = dial_endpoints(p, impl.spec.comm);
  if (!endpoints_.empty()) {
    const auto same_host = same_host_address(p, endpoints_.front().scheme);
    same_host_first_ = same_host && endpoints_.size() > 1 && same_host->abstract == endpoints_.front().abstract &&
                       same_host->path == endpoints_.front().path;
  }
}

PeerStats PeerSession::stats() const {
  std::lock_guard lock(stats_mutex_);
  if (!stats_connection_) return {};
  return {true, std::string(stats_connection_->traits().name), std::string(stats_connection_->payload_path())};
}

void PeerSession::refresh_stats() {
  std::shared_ptr<Connection> current;
  Connection* send = peer_.outbox().send_connection();
  for (const auto& c : connections_)
    if (c.get() == send) current = c;
  // (An acceptor's connection that the peer has not confirmed yet, peer_holds_it, is still the
  // one it reaches the peer by.)
  if (!current && !connections_.empty()) current = connections_.front();
  std::lock_guard lock(stats_mutex_);
  stats_connection_ = std::move(current);
}

void PeerSession::ensure_connection() {
  if (!connections_.empty() || dialing_ || closing()) return;
  dialing_ = true;
  refused_since_.reset();
  dial(deadline_of(Seconds(impl_.spec.comm.connect_timeout_s)),
       std::chrono::duration_cast<std::chrono::milliseconds>(Seconds(impl_.spec.comm.reconnect_backoff_initial_s)), 0);
}

namespace {
// A peer that refuses connections (nothing listens there) is given this long, with quick
// retries, to start listening: the peers of one job may start in any order, but a node that
// is not running is reported about as fast as V0.1 did, not after connect_timeout_s.
constexpr auto kRefusedFor = std::chrono::seconds(2);
bool refused(std::error_code ec) {
  return ec == asio::error::connection_refused || ec == std::errc::no_such_file_or_directory;
}
}  // namespace

// One deadline for the whole dial: connecting (each address in turn) and the handshake.
void PeerSession::dial(Clock::time_point deadline, std::chrono::milliseconds backoff, std::size_t address_index) {
  const Address& address = endpoints_[address_index];
  if (address_index == 0) same_host_refused_ = false;
  pending_dial_ = transport::dial(
      impl_.io, address, deadline, impl_.transport_options(),
      [this, deadline, backoff, address_index](std::error_code ec, std::unique_ptr<transport::Connection> stream) {
        pending_dial_.reset();
        if (closing()) return;
        if (ec) return retry_or_give_up(deadline, backoff, address_index, ec, ec.message());
        if (address_index > 0 && same_host_refused_)
          return look_again_at_same_host(deadline, backoff, address_index, std::move(stream));
        handshake(std::move(stream), deadline, backoff, address_index);
      });
}

// The same-host name was refused a moment ago, and another address of the peer answers now:
// the peer may have just started (a node listens at its same-host name before its TCP
// address). One more look there, so that two nodes on one host that start together do not
// settle on TCP for good; a peer on another host costs one refused connect.
void PeerSession::look_again_at_same_host(Clock::time_point deadline, std::chrono::milliseconds backoff,
                                        std::size_t address_index, std::unique_ptr<transport::Connection> other) {
  same_host_refused_ = false;
  auto held = std::make_shared<std::unique_ptr<transport::Connection>>(std::move(other));  // (a handler is copyable)
  pending_dial_ = transport::dial(
      impl_.io, endpoints_.front(), deadline, impl_.transport_options(),
      [this, deadline, backoff, address_index, held](std::error_code ec, std::unique_ptr<transport::Connection> stream) {
        pending_dial_.reset();
        if (closing()) return;
        if (ec) return handshake(std::move(*held), deadline, backoff, address_index);
        held->reset();  // the peer sees it end before any HELLO
        handshake(std::move(stream), deadline, backoff, 0);
      });
}

void PeerSession::handshake(std::unique_ptr<transport::Connection> stream, Clock::time_point deadline,
                          std::chrono::milliseconds backoff, std::size_t address_index) {
  auto connection = std::make_shared<Connection>(impl_, std::move(stream));
  impl_.handshaking.insert(connection);
  connection->handshake_as_dialer(
      peer_, deadline, [this, connection, deadline, backoff, address_index](std::optional<Error> error) {
        impl_.handshaking.erase(connection);
        if (closing()) return;
        // Keys that do not match will not match on a retry: the sends fail now.
        if (error && connection->auth_refused()) {
          dialing_ = false;
          if (connections_.empty()) peer_.outbox().fail_sends({ErrorCode::kConnectionFailed, error->message});
          return;
        }
        if (error) return retry_or_give_up(deadline, backoff, address_index, {}, error->message);
        dialing_ = false;
        impl_.stats.connections_dialed.fetch_add(1, std::memory_order_relaxed);
        add_connection(connection);
      });
}

void PeerSession::retry_or_give_up(Clock::time_point deadline, std::chrono::milliseconds backoff,
                                 std::size_t address_index, std::error_code ec, const std::string& why) {
  // With auto, the same-host name is tried first, unknown to the user: name the peer's own.
  const std::string where = transport_for(peer_.peer(), impl_.spec.comm) == "auto" ? peer_.peer().endpoints_text()
                                                                           : endpoints_[address_index].to_string();
  // The next address of the peer, at once; after the last, back to the first after a pause.
  const std::size_t next = (address_index + 1) % endpoints_.size();
  const auto now = Clock::now();
  if (address_index == 0 && same_host_first_ && refused(ec)) same_host_refused_ = true;
  if (!refused(ec)) refused_since_.reset();
  else if (!refused_since_) refused_since_ = now;
  const bool nothing_to_send = !peer_.outbox().has_sends();
  // After the last address, a pause with jitter (0.75 to 1.25 of the backoff), so that peers
  // that lost each other at the same moment do not redial in lockstep.
  thread_local std::mt19937 jitter{std::random_device{}()};
  const auto pause = next == 0 ? std::chrono::milliseconds(std::max<std::int64_t>(
                                     1, std::int64_t(double(backoff.count()) *
                                                     std::uniform_real_distribution<double>(0.75, 1.25)(jitter))))
                               : std::chrono::milliseconds(0);
  std::string failure;
  if (now + pause >= deadline || ec == asio::error::timed_out)
    failure = "could not connect to '" + peer_.peer().node_id + "' at " + where + " within " +
              seconds_text(impl_.spec.comm.connect_timeout_s) + " s (connect_timeout_s): " + why;
  else if (refused_since_ && now - *refused_since_ >= kRefusedFor)
    failure = "could not connect to '" + peer_.peer().node_id + "' at " + where + ": " + why + " for " +
              seconds_text(std::round(std::chrono::duration<double>(now - *refused_since_).count() * 10) / 10) +
              " s (is the node running and listening there?)";
  if (nothing_to_send || !failure.empty()) {
    dialing_ = false;
    if (!connections_.empty()) return peer_.outbox().pump();  // the peer dialled us meanwhile
    if (!failure.empty()) peer_.outbox().fail_sends({ErrorCode::kConnectionFailed, failure});
    return;
  }
  if (pause.count() == 0) return dial(deadline, backoff, next);
  backoff_timer_.emplace(impl_.io, pause);
  backoff_timer_->async_wait([this, deadline, backoff, next](std::error_code ec) {
    if (ec || closing()) return;
    if (!connections_.empty()) {
      dialing_ = false;
      return peer_.outbox().pump();
    }
    const auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(Seconds(impl_.spec.comm.reconnect_backoff_max_s));
    dial(deadline, std::min(backoff * 2, cap), next);
  });
}

void PeerSession::add_connection(std::shared_ptr<Connection> connection) {
  if (closing()) return connection->send_close_and_stop();
  // A wcomm peer names its incarnation: a new one means it restarted.
  const std::string& incarnation = connection->peer_incarnation();
  if (!incarnation.empty()) {
    if (!incarnation_.empty() && incarnation != incarnation_) {
      // With the old incarnation's connections still up, what was in flight with it is lost.
      // Without them the peer went down before (and its waiters were told): only say so.
      if (!connections_.empty()) peer_restarted(incarnation_, incarnation);
      else emit(PeerEvent::Kind::kRestarted, "peer '" + peer_.peer().node_id + "' came back as a new incarnation");
    }
    incarnation_ = incarnation;
  }
  const bool was_down = connections_.empty();
  connections_.push_back(connection);
  peer_.on_connection_added(connection);
  refresh_stats();
  connection->start_reading();
  if (was_down) {
    spdlog::debug("wcomm[{}]: peer '{}' reached over {} (large payloads: {})", impl_.spec.local.node_id, peer_.peer().node_id,
                  connection->describe(), connection->payload_path());
    emit(PeerEvent::Kind::kUp, "");
  }
  peer_.outbox().pump();
}

// What was in flight with the old incarnation will never complete: the message being
// written and every waiting recv fail with PeerRestartedError; messages not yet started go to
// the new incarnation, in order.
void PeerSession::peer_restarted(const std::string& old_incarnation, const std::string& new_incarnation) {
  const Error error{ErrorCode::kPeerRestarted, "peer '" + peer_.peer().node_id + "' restarted (incarnation " +
                                                   old_incarnation + " -> " + new_incarnation +
                                                   "); what was in flight with it is lost"};
  peer_.outbox().on_peer_restarted(error);
  auto old = connections_;
  for (auto& c : old) c->fail(error, /*local=*/true);
  peer_.fail_waiting_recvs(error);
  emit(PeerEvent::Kind::kRestarted, error.message);
}

void PeerSession::emit(PeerEvent::Kind kind, const std::string& reason) {
  spdlog::debug("wcomm[{}]: peer '{}' {} (session {}){}{}", impl_.spec.local.node_id, peer_.peer().node_id,
                peer_event_name(kind), state_name(state()), reason.empty() ? "" : ": ", reason);
  impl_.report(PeerEvent{peer_.peer().node_id, kind, reason});
}

void PeerSession::on_connection_lost(Connection& connection, const Error& error, bool local,
                                     std::optional<std::uint32_t> refused_tag) {
  auto it = std::find_if(connections_.begin(), connections_.end(), [&](auto& c) { return c.get() == &connection; });
  if (it == connections_.end()) return;
  auto keep_alive = *it;  // the connection may be running this very call
  connections_.erase(it);
  peer_.on_connection_removed(keep_alive);
  refresh_stats();
  peer_.outbox().on_connection_lost(connection, error);
  peer_.fail_recvs_after_loss(error, local, refused_tag);
  if (connections_.empty()) emit(PeerEvent::Kind::kDown, error.message);
  if (peer_.outbox().has_sends()) ensure_connection();
  peer_.outbox().pump();
}

void PeerSession::drop_connections(const Error& error) {
  // Local: recvs nothing is being read into wait on (for the next connection); a frame being
  // read is abandoned, its recv_into failed, once its reader has let go (ReadOwner::close).
  auto connections = connections_;  // fail() takes each out of connections_
  for (auto& connection : connections) connection->fail(error, /*local=*/true);
}

void PeerSession::close_all(const Error& error) {
  if (closing()) return;
  close_error_ = error;
  draining_ = true;  // nothing new starts; everything pending completes below
  backoff_timer_.reset();
  if (auto dial = std::move(pending_dial_)) dial->cancel();
  peer_.stop_deadline_timer();  // every operation fails below
  peer_.outbox().close(error);
  peer_.close_receiving(error);
  auto connections = std::move(connections_);
  connections_.clear();
  peer_.on_connection_removed(nullptr);
  refresh_stats();
  for (auto& c : connections) c->send_close_and_stop();
  draining_ = false;
  closed_ = true;
}

PeerSession::State PeerSession::state() const {
  if (closed_) return State::kClosed;
  if (draining_) return State::kDraining;
  if (!connections_.empty()) return State::kUp;
  return dialing_ ? State::kDialing : State::kIdle;
}

const char* PeerSession::state_name(State s) {
  switch (s) {
    case State::kIdle: return "idle";
    case State::kDialing: return "dialing";
    case State::kUp: return "up";
    case State::kDraining: return "draining";
    case State::kClosed: return "closed";
  }
  return "?";
}

}  // namespace wcomm
