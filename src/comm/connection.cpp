// Connection: the COMM v1 handshake over the frame reader, liveness, writes and its end.
// Its reading side, the frame sink ReadOwner's reader delivers into, is connection_reading.cpp.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "comm/cluster_auth.h"
#include "comm/comm_impl.h"

namespace wcomm {

std::string new_connection_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = rng();
    for (int i = 0; i < 16; ++i) id[half * 16 + i] = hex[(bits >> (i * 4)) & 0xF];
  }
  return id;
}

Connection::Connection(Comm::Impl& impl, std::unique_ptr<transport::Connection> stream)
    : impl_(impl),
      stream_(std::move(stream)),
      traits_(stream_->traits()),
      reader_(*stream_, impl.spec.comm),
      reader_owner_(impl, *stream_, reader_, *this) {
  reader_.set_handshake(true);  // until finish_handshake
}

Connection::~Connection() = default;

// ---- handshake --------------------------------------------------------------------------

void Connection::read_handshake_frame(std::function<void(Frame)> next) {
  const auto refuse_data = [](const FrameHeader&, std::span<const std::uint8_t>) -> Result<DecodedData> {
    return Error{ErrorCode::kProtocol, "a DATA frame before the handshake completed"};
  };
  switch (reader_.read(refuse_data)) {
    case FrameReader::Status::kFrame:
      return next(reader_.take());
    case FrameReader::Status::kFailed:
      return fail(reader_.error(), false);
    case FrameReader::Status::kWaiting:
      break;
  }
  stream_->async_wait_readable([self = shared_from_this(), next = std::move(next)](std::error_code ec) mutable {
    if (ec == asio::error::operation_aborted || self->failed_) return;
    // A wait that failed (no descriptor left to watch with) would fail again at once: no spin.
    if (ec) return self->fail({ErrorCode::kConnectionFailed, "cannot wait for the handshake: " + ec.message()}, false);
    self->read_handshake_frame(std::move(next));  // the read finds and reports the end of the stream
  });
}

void Connection::start_handshake_timer(Clock::time_point deadline, const char* what) {
  // A connection that never completes the handshake must not hold anything for ever.
  handshake_timer_.emplace(impl_.io, deadline);
  handshake_timer_->async_wait([weak = weak_from_this(), what](std::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && !self->established_ && !self->failed_)
      self->fail({ErrorCode::kConnectionFailed, std::string("no ") + what + " within the connect timeout"}, false);
  });
}

void Connection::finish_handshake(std::optional<Error> error) {
  if (error) return fail(*error, false);
  reader_.set_handshake(false);
  handshake_timer_.reset();
  stream_->stop_waiting_readable();
  established_ = true;
  zstd_ = zstd_ && chunks_;  // compression travels in chunks only
  if (chunks_) {
    chunk_bytes_ = impl_.spec.comm.chunk_bytes;
    if (traits_.same_host) chunk_bytes_ = std::max(chunk_bytes_, kSameHostChunkBytes);
  }
  reader_.set_extensions({chunks_, zstd_, supersede_, retry_keys_}, &impl_.stats.bytes_decompressed);
  reader_.set_peer_name("peer '" + peer_->peer().node_id + "'");
  // A keyed acceptor read the dialer's AUTH, sent after the dialer had the HELLO_ACK.
  if (dialer_ || keyed()) peer_holds_it_.store(true, std::memory_order_release);
  if (dialer_ && supersede_ && !keyed() && !writing_) {
    // Tells the acceptor that this side holds the connection (peer_holds_it): it may write.
    static const std::vector<std::uint8_t> heartbeat = encode_control(FrameKind::kHeartbeat, {});
    write({asio::buffer(heartbeat)}, [](std::error_code) {});  // a failed write shows on the next read
  }
  auto done = std::move(handshake_done_);
  done(std::nullopt);
}

// Negotiated features (docs/wire-format.md): "heartbeat=<interval s>" (each side sends
// heartbeats when idle; silence is judged against the longer interval) and
// "incarnation=<16 hex>" (restart detection). Listed only to peers that list features.
std::vector<std::string> Connection::offered_features() const {
  std::vector<std::string> out;
  if (impl_.spec.comm.heartbeat_interval_s > 0)
    out.push_back("heartbeat=" + seconds_text(impl_.spec.comm.heartbeat_interval_s));
  out.push_back("incarnation=" + impl_.incarnation);
  out.push_back("ack");
  out.push_back("supersede");
  out.push_back("retry-key");
  if (impl_.spec.comm.chunk_bytes > 0) {
    out.push_back("chunks");
    if (impl_.spec.comm.compression != "off" && compression_built()) out.push_back("zstd");
  }
  return out;
}

void Connection::accept_features(const std::vector<std::string>& features) {
  const double own = impl_.spec.comm.heartbeat_interval_s;
  for (const std::string& f : features) {
    if (f == "ack") {
      acks_ = true;
    } else if (f == "supersede") {
      supersede_ = true;
    } else if (f == "retry-key") {
      retry_keys_ = true;
    } else if (f == "chunks") {
      chunks_ = impl_.spec.comm.chunk_bytes > 0;
    } else if (f == "zstd") {
      zstd_ = impl_.spec.comm.compression != "off" && compression_built();
    } else if (f.rfind("incarnation=", 0) == 0) {
      peer_incarnation_ = f.substr(12);
    } else if (f.rfind("heartbeat=", 0) == 0 && own > 0) {
      double theirs = std::strtod(f.c_str() + 10, nullptr);
      if (!(theirs > 0) || theirs > 3600) continue;  // not a usable interval: no heartbeats
      heartbeats_ = true;
      silence_limit_ = to_duration(Seconds(3 * std::max(own, theirs)));
    }
  }
}

void Connection::start_liveness() {
  if (!heartbeats_) return;
  last_heard_ = Clock::now();
  last_read_seen_ = reader_.bytes_read();
  last_written_seen_ = bytes_written_.load(std::memory_order_relaxed);
  liveness_timer_.emplace(impl_.io, to_duration(Seconds(impl_.spec.comm.heartbeat_interval_s)));
  liveness_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->on_liveness_tick();
  });
}

void Connection::on_liveness_tick() {
  if (failed_) return;
  const auto now = Clock::now();
  const std::uint64_t read = reader_.bytes_read();
  // Paused for the inbound bound, we do not read the peer on purpose: not its silence.
  if (read != last_read_seen_ || reader_owner_.paused()) last_heard_ = now;
  last_read_seen_ = read;
  if (now - last_heard_ >= silence_limit_) {
    const double silent = std::chrono::duration<double>(now - last_heard_).count();
    return fail({ErrorCode::kConnectionClosed, "no heartbeat from peer '" + peer_->peer().node_id + "' for " +
                                                   seconds_text(std::round(silent * 10) / 10) +
                                                   " s: declared dead"},
                false);
  }
  const std::uint64_t written = bytes_written_.load(std::memory_order_relaxed);
  if (written == last_written_seen_ && !writing_) peer_->outbox().send_heartbeat(*this);
  last_written_seen_ = bytes_written_.load(std::memory_order_relaxed);
  liveness_timer_->expires_after(to_duration(Seconds(impl_.spec.comm.heartbeat_interval_s)));
  liveness_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->on_liveness_tick();
  });
}

void Connection::handshake_as_dialer(PeerState& peer, Clock::time_point deadline,
                                     std::function<void(std::optional<Error>)> done) {
  peer_ = &peer;
  dialer_ = true;
  connection_id_ = new_connection_id();
  handshake_done_ = std::move(done);
  reader_.set_peer_name("peer '" + peer.peer().node_id + "'");
  start_handshake_timer(deadline, "HELLO_ACK");
  std::vector<std::string> features = offered_features();
  // Where this node listens, for an acceptor that lets unknown nodes join (peer_join.cpp).
  for (const Address& a : impl_.spec.local.endpoints()) features.push_back("listen=" + a.to_string());
  if (keyed()) {
    auth_.dialer_nonce = auth::new_nonce();
    features.push_back("auth=" + auth_.dialer_nonce);
  }
  auto hello = std::make_shared<std::vector<std::uint8_t>>(
      encode_control(FrameKind::kHello, {impl_.spec.local.node_id, connection_id_, features}));
  write({asio::buffer(*hello)}, [self = shared_from_this(), hello](std::error_code ec) {
    if (ec && !self->failed_) self->fail({ErrorCode::kConnectionFailed, "sending HELLO failed: " + ec.message()}, false);
  });
  read_handshake_frame([self = shared_from_this()](Frame frame) {
    const std::string& expected = self->peer_->peer().node_id;
    if (frame.header.kind != FrameKind::kHelloAck)
      return self->finish_handshake(Error{ErrorCode::kProtocol, "expected HELLO_ACK from '" + expected +
                                                                    "', got frame kind " +
                                                                    std::to_string(int(frame.header.kind))});
    auto control = decode_control(frame.header, frame.manifest);
    if (!control) return self->finish_handshake(control.error());
    const Control& c = control.value();
    if (c.node_id != expected || c.connection_id != self->connection_id_)
      return self->finish_handshake(Error{ErrorCode::kProtocol, "HELLO_ACK names node '" + c.node_id +
                                                                    "' / connection " + c.connection_id +
                                                                    ", expected '" + expected + "' / " +
                                                                    self->connection_id_});
    if (auto problem = self->stream_->peer_name_problem(expected)) {
      self->auth_refused_ = true;  // a certificate does not change on a retry
      return self->finish_handshake(Error{ErrorCode::kConnectionFailed, "peer '" + expected + "' refused: " + *problem});
    }
    if (auto refused = self->check_acceptor_proof(c.features)) return self->finish_handshake(refused);
    self->accept_features(c.features);  // a V0.1 peer lists none
    self->finish_handshake(std::nullopt);
  });
}

bool Connection::keyed() const { return !impl_.spec.comm.cluster_key.empty(); }

// Dialer: with a cluster key, the acceptor must prove it in HELLO_ACK ("auth=<nonce>:<proof>");
// then this side proves it too, in an AUTH frame. An acceptor that requires a key this side
// does not have says "auth=required".
std::optional<Error> Connection::check_acceptor_proof(const std::vector<std::string>& features) {
  std::string offered;
  for (const auto& f : features)
    if (f.rfind("auth=", 0) == 0) offered = f.substr(5);
  const std::string& name = peer_->peer().node_id;
  if (!keyed()) {
    if (offered.empty()) return std::nullopt;
    auth_refused_ = true;
    return Error{ErrorCode::kConnectionFailed, "peer '" + name + "' requires a cluster key and this node has none "
                                               "(set comm.cluster_key_file, or WCOMM_CLUSTER_KEY_FILE)"};
  }
  auth_refused_ = true;  // until proven below
  const auto colon = offered.find(':');
  if (offered.empty() || offered == "required" || colon == std::string::npos)
    return Error{ErrorCode::kConnectionFailed, "peer '" + name + "' did not prove the cluster key (it has none, "
                                               "or is a V0.1 node); this node requires it"};
  auth_.acceptor_nonce = offered.substr(0, colon);
  auth_.dialer_id = impl_.spec.local.node_id;
  auth_.acceptor_id = name;
  auth_.connection_id = connection_id_;
  if (!auth::verify(impl_.spec.comm.cluster_key, "acceptor", auth_, offered.substr(colon + 1)))
    return Error{ErrorCode::kConnectionFailed, "peer '" + name + "' proved a different cluster key"};
  auth_refused_ = false;
  auto frame = std::make_shared<std::vector<std::uint8_t>>(encode_control(
      FrameKind::kAuth, {impl_.spec.local.node_id, connection_id_,
                         {"proof=" + auth::proof(impl_.spec.comm.cluster_key, "dialer", auth_)}, {}}));
  write({asio::buffer(*frame)}, [frame](std::error_code) {});  // a failed write shows on the next read
  return std::nullopt;
}

void Connection::handshake_as_acceptor(Clock::time_point deadline, std::function<void(std::optional<Error>)> done) {
  handshake_done_ = std::move(done);
  start_handshake_timer(deadline, "HELLO");
  read_handshake_frame([self = shared_from_this()](Frame frame) {
    if (frame.header.kind != FrameKind::kHello)
      return self->finish_handshake(
          Error{ErrorCode::kProtocol, "expected HELLO, got frame kind " + std::to_string(int(frame.header.kind))});
    auto control = decode_control(frame.header, frame.manifest);
    if (!control) return self->finish_handshake(control.error());
    const Control& c = control.value();
    self->peer_ = self->impl_.find_peer(c.node_id);
    if (!self->peer_) {  // a node that may join (admit() adds it once the handshake checks out)
      auto joining = self->impl_.joining_peer(c, self->peer_host());
      if (!joining) return self->refuse(joining.error());
      self->joining_ = std::move(joining.value());
    }
    self->connection_id_ = c.connection_id;
    if (auto problem = self->stream_->peer_name_problem(c.node_id))
      return self->refuse({ErrorCode::kConnectionFailed, *problem});
    // Features only to a peer that offers some (a V0.1 dialer never does).
    std::vector<std::string> features;
    if (!c.features.empty()) {
      self->accept_features(c.features);
      features = self->offered_features();
    }
    std::string dialer_nonce;
    for (const auto& f : c.features)
      if (f.rfind("auth=", 0) == 0) dialer_nonce = f.substr(5);
    std::optional<Error> refused;
    if (self->keyed() && dialer_nonce.empty()) {
      refused = Error{ErrorCode::kConnectionFailed, "it offered no cluster key proof (a node without the key, or V0.1)"};
      if (!c.features.empty()) features.push_back("auth=required");
    } else if (!self->keyed() && !dialer_nonce.empty()) {
      refused = Error{ErrorCode::kConnectionFailed, "it authenticates with a cluster key and this node has none"};
    } else if (self->keyed()) {
      self->auth_ = {dialer_nonce, auth::new_nonce(), c.node_id, self->impl_.spec.local.node_id, c.connection_id};
      features.push_back("auth=" + self->auth_.acceptor_nonce + ":" +
                         auth::proof(self->impl_.spec.comm.cluster_key, "acceptor", self->auth_));
    }
    auto ack = std::make_shared<std::vector<std::uint8_t>>(
        encode_control(FrameKind::kHelloAck, {self->impl_.spec.local.node_id, c.connection_id, features}));
    self->write({asio::buffer(*ack)}, [self, ack, refused](std::error_code ec) {
      if (self->failed_) return;
      // A refused dialer reads the HELLO_ACK first, which tells it why; then it is closed.
      if (refused) return self->refuse(*refused);
      if (ec) return self->fail({ErrorCode::kConnectionClosed, "sending HELLO_ACK failed: " + ec.message()}, false);
    });
    if (refused) return;
    if (!self->keyed()) return self->admit();
    // The dialer's proof comes next, in an AUTH frame, before anything else.
    self->read_handshake_frame([self](Frame frame) {
      std::optional<Control> proof;
      if (frame.header.kind == FrameKind::kAuth)
        if (auto control = decode_control(frame.header, frame.manifest)) proof = control.value();
      std::string claimed;
      if (proof && proof->connection_id == self->connection_id_)
        for (const auto& f : proof->features)
          if (f.rfind("proof=", 0) == 0) claimed = f.substr(6);
      if (!auth::verify(self->impl_.spec.comm.cluster_key, "dialer", self->auth_, claimed))
        return self->refuse({ErrorCode::kConnectionFailed, claimed.empty() ? "it sent no cluster key proof"
                                                                          : "it proved a different cluster key "
                                                                            "(or replayed an earlier exchange)"});
      self->admit();
    });
  });
}

// Acceptor: the handshake checked out; a node that was not in the directory joins it now.
void Connection::admit() {
  if (joining_) {
    auto joined = impl_.join_peer(std::move(*joining_), stream_->describe());
    joining_.reset();
    if (!joined) return refuse(joined.error());
    peer_ = joined.value();
  }
  finish_handshake(std::nullopt);
}

// Acceptor: a dialer that failed authentication is dropped, without touching the real peer's
// connections; each host is logged once per reason (a flood must not flood the log).
void Connection::refuse(const Error& why) {
  const std::string source = stream_->describe();
  // (A node that may not join is named in the reason.)
  const std::string node = peer_ ? peer_->peer().node_id : joining_ ? joining_->node_id : "";
  // Once per host and reason: a refused node redials from a new port each time.
  const std::string host = stream_->peer_host().empty() ? source : stream_->peer_host();
  if (impl_.refused_sources.size() < 1024 && impl_.refused_sources.insert(host + "|" + why.message).second)
    spdlog::warn("wcomm[{}]: refused a connection {}from {}: {}", impl_.spec.local.node_id,
                 node.empty() ? "" : "naming node '" + node + "' ", source, why.message);
  fail({why.code, "refused: " + why.message}, true);
}

// ---- writing and ending -----------------------------------------------------------------

void Connection::write(std::vector<asio::const_buffer> buffers, std::function<void(std::error_code)> done) {
  writing_ = true;
  stream_->async_write(std::move(buffers), [self = shared_from_this(), done = std::move(done)](std::error_code ec,
                                                                                               std::size_t n) {
    self->writing_ = false;
    self->bytes_written_.fetch_add(n, std::memory_order_relaxed);
    done(ec);
    // A write that was not the peer's (HELLO_ACK) may have held up its queue.
    if (self->established_ && !self->failed_) self->peer_->outbox().pump();
  });
}

void Connection::fail(const Error& error, bool local) {
  if (failed_) return;
  failed_ = true;
  handshake_timer_.reset();
  liveness_timer_.reset();
  if (established_) peer_->outbox().disable_inline();  // no caller may be writing when the stream closes
  if (!local && error.code == ErrorCode::kProtocol)
    spdlog::warn("wcomm[{}]: dropping {}: {}", impl_.spec.local.node_id, stream_->describe(), error.message);
  if (!established_) {
    if (reader_.peer_speaks_tls()) auth_refused_ = true;  // a plain node and a TLS one: no retry helps
    stream_->close();
    if (handshake_done_) {
      auto done = std::move(handshake_done_);
      done(error);
    }
    return;
  }
  reader_owner_.close(error, ReadOwner::Ending::kAbort);
  peer_->session().on_connection_lost(*this, error, local, local ? std::nullopt : reader_.refused_tag());
}

void Connection::send_close_and_stop() {
  if (failed_) return;
  if (established_ && !writing_) {
    auto frame = encode_control(FrameKind::kClose, {});
    stream_->try_write_now(frame.data(), frame.size());
  }
  failed_ = true;
  liveness_timer_.reset();
  if (established_) reader_owner_.close(Error{ErrorCode::kClosed, "the Comm was closed"}, ReadOwner::Ending::kGraceful);
  else stream_->close();
}

}  // namespace wcomm
