// Connection: the COMM v1 handshake and the frame reader of one byte stream. Frames are read
// as header, manifest, then segments straight into the storage the decoder allocated, by a
// non-blocking pump that the loop or a caller blocked in recv runs (see comm_impl.h).
#include <spdlog/spdlog.h>

#include <random>

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

Connection::Connection(Comm::Impl& impl, std::unique_ptr<transport::Stream> stream)
    : impl_(impl), stream_(std::move(stream)) {}

Connection::~Connection() = default;

Error Connection::read_error(std::error_code ec, const char* what, bool mid_frame) const {
  std::string who = peer_ ? "peer '" + peer_->peer().node_id + "'" : "the remote side";
  if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    if (!mid_frame) return {ErrorCode::kConnectionClosed, who + " closed the connection"};
    return {ErrorCode::kConnectionClosed,
            who + " closed the connection mid-frame (while reading the " + std::string(what) + ")"};
  }
  return {ErrorCode::kConnectionClosed, "connection to " + who + " failed while reading the " + std::string(what) +
                                            ": " + ec.message()};
}

void Connection::read_header(std::function<void(const FrameHeader&)> next) {
  stream_->async_read({asio::buffer(header_, kHeaderSize)},
                      [self = shared_from_this(), next = std::move(next)](std::error_code ec, std::size_t) {
                        if (self->failed_) return;
                        if (ec) return self->fail(self->read_error(ec, "frame header", false), false);
                        auto header = parse_header(self->header_, self->impl_.spec.comm);
                        if (!header) return self->fail(header.error(), false);
                        next(header.value());
                      });
}

void Connection::read_manifest(const FrameHeader& header, std::function<void()> next) {
  manifest_.resize(header.manifest_size);  // bounded by max_manifest_bytes in parse_header
  stream_->async_read({asio::buffer(manifest_)},
                      [self = shared_from_this(), next = std::move(next)](std::error_code ec, std::size_t) {
                        if (self->failed_) return;
                        if (ec) return self->fail(self->read_error(ec, "manifest", true), false);
                        next();
                      });
}

void Connection::handshake_as_dialer(PeerState& peer, std::function<void(std::optional<Error>)> done) {
  peer_ = &peer;
  connection_id_ = new_connection_id();
  handshake_done_ = std::move(done);
  auto hello = std::make_shared<std::vector<std::uint8_t>>(
      encode_control(FrameKind::kHello, {impl_.spec.local.node_id, connection_id_, {}}));
  write({asio::buffer(*hello)}, [self = shared_from_this(), hello](std::error_code ec) {
    if (ec && !self->failed_) self->fail({ErrorCode::kConnectionFailed, "sending HELLO failed: " + ec.message()}, false);
  });
  read_header([self = shared_from_this()](const FrameHeader& header) {
    if (header.kind != FrameKind::kHelloAck)
      return self->fail({ErrorCode::kProtocol, "expected HELLO_ACK from '" + self->peer_->peer().node_id +
                                                   "', got frame kind " + std::to_string(int(header.kind))},
                        false);
    self->read_manifest(header, [self, header] {
      auto control = decode_control(header, self->manifest_);
      if (!control) return self->fail(control.error(), false);
      const Control& c = control.value();
      if (c.node_id != self->peer_->peer().node_id || c.connection_id != self->connection_id_)
        return self->fail({ErrorCode::kProtocol, "HELLO_ACK names node '" + c.node_id + "' / connection " +
                                                     c.connection_id + ", expected '" + self->peer_->peer().node_id +
                                                     "' / " + self->connection_id_},
                          false);
      self->established_ = true;
      auto done = std::move(self->handshake_done_);
      done(std::nullopt);
    });
  });
}

void Connection::handshake_as_acceptor(std::function<void(std::optional<Error>)> done) {
  handshake_done_ = std::move(done);
  // A connection that never says HELLO must not hold resources for ever.
  handshake_timer_.emplace(impl_.io, std::chrono::duration_cast<Clock::duration>(
                                         Seconds(impl_.spec.comm.connect_timeout_s)));
  handshake_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && !self->established_ && !self->failed_)
      self->fail({ErrorCode::kProtocol, "no HELLO within the connect timeout"}, false);
  });
  read_header([self = shared_from_this()](const FrameHeader& header) {
    if (header.kind != FrameKind::kHello)
      return self->fail({ErrorCode::kProtocol, "expected HELLO, got frame kind " + std::to_string(int(header.kind))},
                        false);
    self->read_manifest(header, [self, header] {
      auto control = decode_control(header, self->manifest_);
      if (!control) return self->fail(control.error(), false);
      const Control& c = control.value();
      PeerState* peer = self->impl_.find_peer(c.node_id);
      if (!peer)
        return self->fail({ErrorCode::kProtocol, "HELLO from unknown node '" + c.node_id +
                                                     "' (not in this node's peer directory)"},
                          false);
      self->peer_ = peer;
      self->connection_id_ = c.connection_id;
      auto ack = std::make_shared<std::vector<std::uint8_t>>(
          encode_control(FrameKind::kHelloAck, {self->impl_.spec.local.node_id, c.connection_id, {}}));
      self->write({asio::buffer(*ack)}, [self, ack](std::error_code ec) {
        if (self->failed_) return;
        if (ec) return self->fail({ErrorCode::kConnectionClosed, "sending HELLO_ACK failed: " + ec.message()}, false);
      });
      self->handshake_timer_.reset();
      self->established_ = true;
      auto done = std::move(self->handshake_done_);
      done(std::nullopt);
    });
  });
}

// ---- frame reading ----------------------------------------------------------------------

void Connection::start_reading() { read_from_loop(); }  // bytes may already be waiting

void Connection::resume_reading() {
  {
    std::lock_guard lock(read_mutex_);
    if (!paused_) return;
    paused_ = false;
  }
  read_from_loop();
}

// The loop reads whenever no caller is reading. While one is, the loop stands down: it stops
// watching the socket (which would wake it for every message the caller reads) and looks
// again after kStandDown, then after twice as long each time it finds the caller still
// reading (each wake-up of the loop can delay the reader's next message), up to
// kLongStandDown; after that it watches again, so that a long wait costs no timer wake-ups.
// Whoever needs the loop to read meanwhile says so: a reader that stops while other recvs
// wait (end_caller_read), and a recv parked for a callback or with a timeout (read_soon).
namespace {
constexpr auto kStandDown = std::chrono::milliseconds(1);
constexpr auto kLongStandDown = std::chrono::milliseconds(16);
}

void Connection::read_from_loop() {
  if (failed_) return;
  if (caller_reading_.load()) return stand_down();
  PumpResult result;
  std::optional<Error> failure;
  {
    std::lock_guard lock(read_mutex_);
    const std::uint64_t before = frames_read_by_loop_;
    result = pump_locked(true, nullptr);
    failure = read_failure_;
    // The loop read messages itself, so callers no longer do: a later stand-down starts short.
    // (Finding nothing between two of a caller's recvs says nothing of the kind.)
    if (frames_read_by_loop_ != before) stand_down_period_ = kStandDown;
  }
  if (result == PumpResult::kFailed) return fail(*failure, false);
  // Paused: bytes wait unread on purpose, and watching would report them at once, again and
  // again; resume_reading() reads on once the application has drained.
  if (result == PumpResult::kDrained) arm_from_loop();
}

void Connection::stand_down() {
  stream_->stop_waiting_readable();  // its handler sees operation_aborted
  loop_armed_ = false;
  if (stand_down_timer_) return;
  stand_down_timer_.emplace(impl_.io, stand_down_period_);
  standing_down_.store(true);
  stand_down_timer_->async_wait([self = shared_from_this(), generation = ++stand_down_generation_](std::error_code ec) {
    // A timer that read_soon() or close_stream() dropped may still fire: only the last counts.
    if (ec || generation != self->stand_down_generation_) return;
    self->end_stand_down();
    if (!self->caller_reading_.load()) return self->read_from_loop();
    if (self->stand_down_period_ >= kLongStandDown) return self->arm_from_loop();
    self->stand_down_period_ *= 2;
    self->stand_down();
  });
}

void Connection::end_stand_down() {
  stand_down_timer_.reset();
  ++stand_down_generation_;
  standing_down_.store(false);
}

void Connection::read_soon() {
  if (failed_ || !stand_down_timer_) return;  // the loop watches the socket already
  read_requested_.store(true);
  if (caller_reading_.load()) return;  // the reader hands the reading back when it stops
  read_requested_.store(false);
  end_stand_down();
  read_from_loop();
}

void Connection::arm_from_loop() {
  if (failed_ || loop_armed_) return;
  loop_armed_ = true;
  stream_->async_wait_readable([self = shared_from_this()](std::error_code ec) {
    // Aborted: whoever stopped the wait has cleared loop_armed_ (or the stream is closed).
    // Other errors and the end of the stream are the pump's to find and report.
    if (ec == asio::error::operation_aborted) return;
    self->loop_armed_ = false;
    self->read_from_loop();
  });
}

bool Connection::begin_caller_read() {
  std::lock_guard lock(read_mutex_);
  if (closing_ || paused_ || read_failure_ || caller_reading_.load()) return false;
  caller_reading_.store(true);
  return true;
}

Connection::PumpResult Connection::pump_from_caller(const RecvWaiter& until, bool busy_polling) {
  std::lock_guard lock(read_mutex_);
  caller_busy_polling_ = busy_polling;
  return pump_locked(false, &until);
}

void Connection::end_caller_read(bool others_waiting) {
  bool closing, failed;
  {
    std::lock_guard lock(read_mutex_);
    caller_reading_.store(false);
    closing = closing_;
    failed = read_failure_.has_value();
  }
  // The loop may be standing down; it must look now if it has something to do: close or
  // fail the connection, or read for other waiters (who would otherwise wait for its timer).
  const bool requested = read_requested_.exchange(false);  // by read_soon() while we read
  if (!closing && !failed && !others_waiting && !requested) return;
  std::weak_ptr<Connection> weak = weak_from_this();
  asio::post(impl_.io, [weak, closing] {
    auto self = weak.lock();
    if (!self) return;
    if (closing) return self->stream_->close();  // fail() left the descriptor to us
    self->read_from_loop();
  });
}

Connection::PumpResult Connection::pump_locked(bool from_loop, const RecvWaiter* until) {
  // Each stage reads what the socket has; one that cannot complete ends the pump for now.
  auto stopped = [&] { return read_failure_ ? PumpResult::kFailed : PumpResult::kDrained; };
  while (!read_failure_) {
    switch (stage_) {
      case Stage::kIdle:
        if (until && until->promise.done()) return PumpResult::kDrained;  // what the caller came for
        if (paused_) return PumpResult::kPaused;
        if (peer_->pause_if_full(shared_from_this())) {
          paused_ = true;  // TCP now pushes back on the sender until the application drains
          return PumpResult::kPaused;
        }
        stage_ = Stage::kHeader;
        stage_bytes_ = 0;
        continue;
      case Stage::kHeader:
        if (stage_bytes_ == 0) {
          const HeadPeek peek = peek_head();
          if (peek == HeadPeek::kNothing) return stopped();
          if (peek == HeadPeek::kWhole) continue;
        }
        if (!read_stage({asio::buffer(header_, kHeaderSize)}, kHeaderSize, "frame header")) return stopped();
        on_header();
        continue;
      case Stage::kManifest:
        if (!read_stage({asio::buffer(manifest_)}, manifest_.size(), "manifest")) return stopped();
        if (frame_header_.kind == FrameKind::kClose)
          read_failure_ = Error{ErrorCode::kConnectionClosed, "peer '" + peer_->peer().node_id + "' closed the connection"};
        else
          on_data_manifest();
        continue;
      case Stage::kSegments:
        if (!read_stage(segment_buffers_, segment_bytes_, "payload")) return stopped();
        finish_frame(from_loop);
        continue;
    }
  }
  return PumpResult::kFailed;
}

// Reads more of the current stage; true once it is complete.
bool Connection::read_stage(const std::vector<asio::mutable_buffer>& buffers, std::size_t size, const char* what) {
  std::error_code ec;
  stage_bytes_ += stream_->try_read(buffers, stage_bytes_, ec);
  if (stage_bytes_ == size) return true;
  const bool mid_frame = !(stage_ == Stage::kHeader && stage_bytes_ == 0);
  if (ec) read_failure_ = read_error(ec, what, mid_frame);
  return false;
}

// A peek at the next frame usually holds its header and manifest whole: then they are read
// together with the payload, one system call instead of three.
Connection::HeadPeek Connection::peek_head() {
  std::error_code ec;
  const std::size_t got = stream_->try_peek(head_peek_.data(), head_peek_.size(), ec);
  if (got == 0) return ec ? HeadPeek::kPartial : HeadPeek::kNothing;  // the read reports ec
  if (got < kHeaderSize) return HeadPeek::kPartial;
  auto header = parse_header(head_peek_.data(), impl_.spec.comm);
  if (!header || header.value().kind != FrameKind::kData || kHeaderSize + header.value().manifest_size > got)
    return HeadPeek::kPartial;  // the stage-by-stage reads take it (and report what is wrong)
  frame_header_ = header.value();
  const auto* manifest = head_peek_.data() + kHeaderSize;
  manifest_.assign(manifest, manifest + frame_header_.manifest_size);
  peeked_head_bytes_ = kHeaderSize + frame_header_.manifest_size;
  on_data_manifest();
  return HeadPeek::kWhole;
}

void Connection::on_header() {
  auto header = parse_header(header_, impl_.spec.comm);
  if (!header) {
    read_failure_ = header.error();
    return;
  }
  frame_header_ = header.value();
  if (frame_header_.kind != FrameKind::kData && frame_header_.kind != FrameKind::kClose) {
    read_failure_ = Error{ErrorCode::kProtocol,
                          "unexpected frame kind " + std::to_string(int(frame_header_.kind)) + " after the handshake"};
    return;
  }
  manifest_.resize(frame_header_.manifest_size);  // bounded by max_manifest_bytes in parse_header
  stage_ = Stage::kManifest;
  stage_bytes_ = 0;
}

void Connection::on_data_manifest() {
  // A pending recv_into on this tag takes the tensors straight into the caller's memory.
  auto into = peer_->into_waiter_for(frame_header_.tag);
  std::size_t next_into = 0;
  std::optional<std::string> into_mismatch;
  CodecOptions options;
  options.limits = &impl_.spec.comm;
  options.registry = &impl_.registry;
  std::shared_lock codec_lock(impl_.codec_mutex);
  options.allocate = [&](const SegmentSpec& spec) -> Result<Buffer> {
    if (into && spec.dtype) {
      if (next_into < into->into.size()) {
        const Tensor& t = into->into[next_into++];
        if (t.dtype() == *spec.dtype && t.shape() == *spec.shape) return t.buffer();
        into_mismatch = "tensor " + std::to_string(next_into - 1) + " of the message is " +
                        std::string(dtype_name(*spec.dtype)) + " with " + std::to_string(spec.shape->size()) +
                        " dims, which does not match the recv_into destination";
      } else if (!into_mismatch) {
        into_mismatch = "the message holds more tensors than recv_into was given";
      }
    }
    if (impl_.allocator) {
      Buffer b = impl_.allocator(spec.nbytes);
      if (b.size() != spec.nbytes) return Error{ErrorCode::kInvalidArgument, "allocator returned a wrong size"};
      return b;
    }
    return Buffer::allocate(spec.nbytes);
  };
  auto decoded = decode_data_manifest(frame_header_, manifest_, options);
  codec_lock.unlock();
  if (!decoded) {
    peeked_head_bytes_ = 0;
    read_failure_ = decoded.error();
    return;
  }
  if (into) into->claimed = true;
  frame_into_ = std::move(into);
  into_mismatch_ = std::move(into_mismatch);
  frame_data_.emplace(std::move(decoded).value());
  segment_buffers_.clear();
  segment_bytes_ = 0;
  if (peeked_head_bytes_) {  // header and manifest are still in the socket: read them over the peek
    segment_buffers_.emplace_back(head_peek_.data(), peeked_head_bytes_);
    segment_bytes_ = peeked_head_bytes_;
    peeked_head_bytes_ = 0;
  }
  for (const Buffer& b : frame_data_->segments)
    if (b.size()) {
      segment_buffers_.emplace_back(b.data(), b.size());
      segment_bytes_ += b.size();
    }
  stage_ = Stage::kSegments;
  stage_bytes_ = 0;
}

void Connection::finish_frame(bool from_loop) {
  const FrameHeader& header = frame_header_;
  Received message{std::move(frame_data_->root), std::move(frame_data_->piggypayload), header.message_id,
                   header.frame_bytes()};
  frame_data_.reset();
  segment_buffers_.clear();
  stage_ = Stage::kIdle;
  stage_bytes_ = 0;
  impl_.stats.messages_received.fetch_add(1, std::memory_order_relaxed);
  impl_.stats.wire_bytes_received.fetch_add(header.frame_bytes(), std::memory_order_relaxed);
  if (from_loop) {
    frames_read_by_loop_ += 1;
  } else {
    impl_.stats.messages_read_by_receivers.fetch_add(1, std::memory_order_relaxed);
    if (caller_busy_polling_) impl_.stats.messages_read_busy_polling.fetch_add(1, std::memory_order_relaxed);
  }
  if (auto into = std::move(frame_into_)) {
    frame_into_.reset();
    if (into_mismatch_)
      peer_->complete_into_waiter(
          into, Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *into_mismatch_ + "; the message was dropped"},
          from_loop);
    else
      peer_->complete_into_waiter(into, std::move(message), from_loop);
  } else {
    peer_->deliver(header.tag, std::move(message), from_loop);
  }
}

void Connection::write(std::vector<asio::const_buffer> buffers, std::function<void(std::error_code)> done) {
  writing_ = true;
  stream_->async_write(std::move(buffers), [self = shared_from_this(), done = std::move(done)](std::error_code ec,
                                                                                               std::size_t) {
    self->writing_ = false;
    done(ec);
    // A write that was not the peer's (HELLO_ACK) may have held up its queue.
    if (self->established_ && !self->failed_) self->peer_->pump();
  });
}

void Connection::close_stream() {
  end_stand_down();
  bool caller_reading;
  {
    std::lock_guard lock(read_mutex_);
    closing_ = true;
    caller_reading = caller_reading_.load();
  }
  // A caller may be polling the descriptor: end the stream (which wakes it) but leave the
  // descriptor to it, so that it is not reused under its feet; it closes it when done.
  if (caller_reading) stream_->shutdown();
  else stream_->close();
}

void Connection::fail(const Error& error, bool local) {
  if (failed_) return;
  failed_ = true;
  handshake_timer_.reset();
  if (established_) peer_->disable_inline();  // no caller may be writing when the fd closes
  close_stream();
  if (!local && error.code == ErrorCode::kProtocol)
    spdlog::warn("wcomm[{}]: dropping {}: {}", impl_.spec.local.node_id, stream_->describe(), error.message);
  if (!established_) {
    if (handshake_done_) {
      auto done = std::move(handshake_done_);
      done(error);
    }
    return;
  }
  std::shared_ptr<RecvWaiter> into;
  {
    std::lock_guard lock(read_mutex_);
    into = std::move(frame_into_);
    frame_into_.reset();
  }
  if (into) peer_->complete_into_waiter(into, Error{ErrorCode::kConnectionClosed, error.message}, true);
  peer_->on_connection_lost(*this, error, local);
}

void Connection::send_close_and_stop() {
  if (failed_) return;
  if (established_ && !writing_) {
    auto frame = encode_control(FrameKind::kClose, {});
    stream_->try_write_now(frame.data(), frame.size());
  }
  failed_ = true;
  close_stream();
}

}  // namespace wcomm
