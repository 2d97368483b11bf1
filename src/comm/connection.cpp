// Connection: the COMM v1 handshake and the frame reader of one byte stream. Frames are read
// as header, manifest, then segments straight into the storage the decoder allocated.
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

Error Connection::read_error(std::error_code ec, const char* what) const {
  std::string who = peer_ ? "peer '" + peer_->peer().node_id + "'" : "the remote side";
  if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    if (!frame_in_progress_) return {ErrorCode::kConnectionClosed, who + " closed the connection"};
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
                        if (ec) return self->fail(self->read_error(ec, "frame header"), false);
                        self->frame_in_progress_ = true;
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
                        if (ec) return self->fail(self->read_error(ec, "manifest"), false);
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
      self->frame_in_progress_ = false;
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
      self->frame_in_progress_ = false;
      auto done = std::move(self->handshake_done_);
      done(std::nullopt);
    });
  });
}

void Connection::start_reading() { read_next_frame(); }

void Connection::resume_reading() {
  if (!paused_ || failed_) return;
  paused_ = false;
  read_next_frame();
}

void Connection::read_next_frame() {
  frame_in_progress_ = false;
  if (peer_->pause_if_full(shared_from_this())) {
    paused_ = true;  // TCP now pushes back on the sender until the application drains
    return;
  }
  read_header([self = shared_from_this()](const FrameHeader& header) {
    switch (header.kind) {
      case FrameKind::kData:
        return self->read_manifest(header, [self, header] { self->on_data_manifest(header); });
      case FrameKind::kClose:
        return self->read_manifest(header, [self] {
          self->frame_in_progress_ = false;
          self->fail({ErrorCode::kConnectionClosed,
                      "peer '" + self->peer_->peer().node_id + "' closed the connection"},
                     false);
        });
      default:
        return self->fail({ErrorCode::kProtocol, "unexpected frame kind " + std::to_string(int(header.kind)) +
                                                     " after the handshake"},
                          false);
    }
  });
}

void Connection::on_data_manifest(const FrameHeader& header) {
  // A pending recv_into on this tag takes the tensors straight into the caller's memory.
  auto into = peer_->into_waiter_for(header.tag);
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
  auto decoded = decode_data_manifest(header, manifest_, options);
  codec_lock.unlock();
  if (!decoded) return fail(decoded.error(), false);
  if (into) into->claimed = true;

  auto data = std::make_shared<DecodedData>(std::move(decoded).value());
  std::vector<asio::mutable_buffer> buffers;
  buffers.reserve(data->segments.size());
  for (const Buffer& b : data->segments)
    if (b.size()) buffers.emplace_back(b.data(), b.size());
  auto finish = [self = shared_from_this(), header, data, into, into_mismatch](std::error_code ec, std::size_t) {
    if (ec) {
      Error error = self->failed_ ? Error{ErrorCode::kConnectionClosed, "connection closed while receiving"}
                                  : self->read_error(ec, "payload");
      if (into) self->peer_->complete_into_waiter(into, error);
      if (!self->failed_) self->fail(error, false);
      return;
    }
    Received message{std::move(data->root), std::move(data->piggypayload), header.message_id, header.frame_bytes()};
    self->impl_.stats.messages_received.fetch_add(1, std::memory_order_relaxed);
    self->impl_.stats.wire_bytes_received.fetch_add(header.frame_bytes(), std::memory_order_relaxed);
    if (into) {
      if (into_mismatch)
        self->peer_->complete_into_waiter(
            into, Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *into_mismatch + "; the message was dropped"});
      else
        self->peer_->complete_into_waiter(into, std::move(message));
    } else {
      self->peer_->deliver(header.tag, std::move(message));
    }
    if (!self->failed_) self->read_next_frame();
  };
  if (buffers.empty()) return finish({}, 0);
  stream_->async_read(std::move(buffers), std::move(finish));
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

void Connection::fail(const Error& error, bool local) {
  if (failed_) return;
  failed_ = true;
  handshake_timer_.reset();
  if (established_) peer_->disable_inline();  // no caller may be writing when the fd closes
  stream_->close();
  if (!local && error.code == ErrorCode::kProtocol)
    spdlog::warn("wcomm[{}]: dropping {}: {}", impl_.spec.local.node_id, stream_->describe(), error.message);
  if (!established_) {
    if (handshake_done_) {
      auto done = std::move(handshake_done_);
      done(error);
    }
    return;
  }
  peer_->on_connection_lost(*this, error, local);
}

void Connection::send_close_and_stop() {
  if (failed_) return;
  if (established_ && !writing_) {
    auto frame = encode_control(FrameKind::kClose, {});
    stream_->try_write_now(frame.data(), frame.size());
  }
  failed_ = true;
  stream_->close();
}

}  // namespace wcomm
