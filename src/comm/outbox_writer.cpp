// The outbox's writer: which message goes next (priority classes, per-tag order), chunked
// messages written a chunk at a time between the others, adaptive compression of chunks,
// and the egress scheduler's grants. Loop thread.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

#include "comm/comm_impl.h"
#include "comm/outbox.h"

namespace wcomm {

namespace {
bool urgent(const OutMessage& m) { return m.priority == Priority::kHigh; }
bool bulk(const OutMessage& m) { return m.priority == Priority::kBulk; }
}  // namespace

// The next message to write a unit of: the highest class among the chunked messages under
// way and the queued ones whose tag is free (no earlier message on it unfinished); within a
// class the oldest (those under way, then the queue in order).
// With a cap on bulk flows (egress_max_bulk_flows) a bulk message that cannot have a slot
// waits, and the others go on; the scheduler wakes the writer when a slot frees.
std::shared_ptr<OutMessage> Outbox::pick_next() {
  std::shared_ptr<OutMessage> best;
  std::unordered_set<std::uint32_t> busy_tags;
  const bool bulk_allowed = !impl_.scheduler || impl_.scheduler->bulk_slot_for(this);
  bool bulk_held_back = false;
  auto consider = [&](const std::shared_ptr<OutMessage>& m) {
    if (bulk(*m) && !bulk_allowed) {
      bulk_held_back = true;
      return;
    }
    if (!best || m->priority < best->priority) best = m;
  };
  for (const auto& m : streaming_) {
    busy_tags.insert(m->frame_tag());
    consider(m);
  }
  for (const auto& m : queue_) {
    if (best && best->priority == Priority::kHigh) break;
    if (m->state == OutMessage::State::kDone) continue;
    if (!busy_tags.insert(m->frame_tag()).second) continue;  // behind an earlier one on its tag
    consider(m);
  }
  if (!best && bulk_held_back)
    impl_.scheduler->wake_on_bulk_slot(this, [this] { pump(); });
  return best;
}

void Outbox::pump_queue() {
  if (active_ || closing()) return;
  while (!queue_.empty() && queue_.front()->state == OutMessage::State::kDone) queue_.pop_front();
  Connection* connection = send_connection();
  if (!connection || connection->writing()) return;
  auto message = pick_next();
  if (!message) return;
  if (message->state == OutMessage::State::kQueued) {
    if ((message->frame.head[7] & kFlagRetryKey) && !connection->retry_keys()) {
      cancel_send(message, Error{ErrorCode::kUnsupportedPayload,
                                 "peer '" + node_id() + "' does not take retry keys (a V0.1 node): send without retry_key"});
      return pump_queue();
    }
    queue_.erase(std::find(queue_.begin(), queue_.end(), message));
    message->state = OutMessage::State::kActive;
    // Ask for an ACK where the peer gives them (a V0.1 peer never sees the flag).
    std::uint8_t flags = message->wants_ack && connection->acks() ? kFlagAckRequested : 0;
    // The first frame on a connection after writing on another: the peer drops what the
    // others still bring (Inbox::reading_).
    if (!connection->used() && wrote_data_.load(std::memory_order_relaxed) && connection->supersedes())
      flags |= kFlagSupersedes;
    connection->mark_used();
    wrote_data_.store(true, std::memory_order_relaxed);
    const std::uint64_t chunk = connection->chunk_bytes();
    if (chunk > 0 && message->frame.payload_bytes > chunk) {
      message->chunked = true;
      message->stream_connection = connection;
      flags |= kFlagChunked;
      streaming_.push_back(message);
      impl_.stats.messages_chunked.fetch_add(1, std::memory_order_relaxed);
    }
    message->frame.head[7] |= flags;  // (kFlagRetryKey is the encoder's)
  } else if (message->stream_connection != connection) {
    return;  // its connection is going away (on_connection_lost fails it)
  }
  start_unit(message, *connection);
}

void Outbox::start_unit(const std::shared_ptr<OutMessage>& message, Connection& connection) {
  active_ = message;
  active_connection_ = &connection;
  auto unit = std::make_shared<Unit>();
  unit->message = message;
  unit->started = Clock::now();
  if (message->chunked) {
    build_chunk(*unit, connection);
  } else {
    unit->buffers = message->gather();
  }
  for (const auto& b : unit->buffers) unit->total += b.size();
  unit->handed_over_base = connection.bytes_handed_over();
  unit_ = unit;
  write_unit(std::move(unit));
}

// A chunked message's next unit: its head first (once), then one CHUNK frame.
void Outbox::build_chunk(Unit& unit, Connection& connection) {
  OutMessage& m = *unit.message;
  if (m.payload_sent == 0) unit.buffers.emplace_back(m.frame.head.data(), m.frame.head.size());
  const std::uint64_t n = std::min(connection.chunk_bytes(), m.frame.payload_bytes - m.payload_sent);
  auto payload = slice_buffers(m.payload_gather(), m.payload_sent, n);
  FrameHeader h;
  h.kind = FrameKind::kChunk;
  h.tag = m.frame_tag();
  h.message_id = m.id;
  h.payload_size = n;
  if (compress_chunk(unit, connection, payload, n)) {
    h.flags = kFlagCompressed;
    h.payload_size = unit.compressed.size();
  }
  write_header(h, unit.chunk_header.data());
  unit.buffers.emplace_back(unit.chunk_header.data(), unit.chunk_header.size());
  if (h.flags & kFlagCompressed) unit.buffers.emplace_back(unit.compressed.data(), unit.compressed.size());
  else unit.buffers.insert(unit.buffers.end(), payload.begin(), payload.end());
  unit.payload_advance = n;
  impl_.stats.chunks_sent.fetch_add(1, std::memory_order_relaxed);
}

// Adaptive compression: a chunk is compressed when the peer negotiated it over TCP, the
// message allows it, and (kAuto) the link is measured slower than the compressor. The first
// try on a message is a small sample; data that does not shrink is sent as it is, and a
// message whose chunks keep not shrinking is not tried again.
bool Outbox::compress_chunk(Unit& unit, Connection& connection, const std::vector<asio::const_buffer>& payload,
                               std::uint64_t n) {
  OutMessage& m = *unit.message;
  if (!connection.zstd() || !connection.traits().measures_link || m.compress == Compression::kOff || m.incompressible) return false;
  if (m.compress == Compression::kAuto) {
    const double link = connection.link_rate().bytes_per_second;
    if (link <= 0) return false;  // not measured yet: the first chunks measure it
    if (impl_.compressor_rate > 0 && impl_.compressor_rate <= link) return false;
  }
  auto timed = [&](const std::vector<asio::const_buffer>& in, std::uint64_t bytes) {
    const auto t0 = Clock::now();
    auto out = impl_.compressor.compress(in, bytes);
    const auto took = Clock::now() - t0;
    const double s = std::chrono::duration<double>(took).count();
    impl_.stats.compression_nanoseconds.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count(),
                                                  std::memory_order_relaxed);
    if (s > 0) {
      const double rate = static_cast<double>(bytes) / s;
      impl_.compressor_rate = impl_.compressor_rate == 0 ? rate : 0.8 * impl_.compressor_rate + 0.2 * rate;
    }
    return out;
  };
  if (!m.sampled) {
    m.sampled = true;
    const std::uint64_t sample_bytes = std::min<std::uint64_t>(32 << 10, n / 2);
    if (sample_bytes >= 4096) {
      auto sample = timed(slice_buffers(payload, 0, sample_bytes), sample_bytes);
      // Less than a tenth saved on the sample: not worth the compressor's time.
      if (sample.empty() || sample.size() * 10 > sample_bytes * 9) {
        m.incompressible = true;
        return false;
      }
    }
  }
  unit.compressed = timed(payload, n);
  impl_.stats.compression_bytes_in.fetch_add(n, std::memory_order_relaxed);
  if (unit.compressed.empty() || unit.compressed.size() * 10 > n * 9) {
    impl_.stats.compression_bytes_out.fetch_add(n, std::memory_order_relaxed);
    if (++m.failed_compressions >= 3) m.incompressible = true;
    if (unit.compressed.empty()) return false;
  } else {
    m.failed_compressions = 0;
    impl_.stats.compression_bytes_out.fetch_add(unit.compressed.size(), std::memory_order_relaxed);
  }
  return true;
}

// Writes the unit: whole, or with the scheduler on, one grant at a time.
void Outbox::write_unit(std::shared_ptr<Unit> unit) {
  if (unit_ != unit || !active_connection_) return;
  auto on_written = [this, unit](std::error_code ec, std::uint64_t bytes) {
    if (unit_ != unit) return;  // aborted meanwhile (its message is completed already)
    if (ec) return finish_active(ec);
    unit->written += bytes;
    if (unit->written < unit->total) return write_unit(unit);
    on_unit_written(unit);
  };
  if (!impl_.scheduler || !impl_.scheduler->enabled()) {
    return active_connection_->write(unit->buffers, [on_written, total = unit->total](std::error_code ec) {
      on_written(ec, total);
    });
  }
  const OutMessage& m = *unit->message;
  impl_.scheduler->request(this, unit->total - unit->written, urgent(m), bulk(m),
                           [this, unit, on_written](std::uint64_t grant) {
                             if (unit_ != unit || !active_connection_) return;
                             active_connection_->write(slice_buffers(unit->buffers, unit->written, grant),
                                                       [on_written, grant](std::error_code ec) { on_written(ec, grant); });
                           });
}

void Outbox::on_unit_written(const std::shared_ptr<Unit>& unit) {
  auto& m = unit->message;
  if (!m->chunked) return finish_active({});
  m->payload_sent += unit->payload_advance;
  if (active_connection_ && active_connection_->traits().measures_link)
    active_connection_->link_rate().sample(unit->total, Clock::now() - unit->started);
  if (m->payload_sent >= m->frame.payload_bytes) return finish_active({});
  // More to come: whatever is most urgent goes next (maybe this message again).
  unit_.reset();
  active_.reset();
  active_connection_ = nullptr;
  pump();
}

void Outbox::fail_streaming(Connection* connection, const Error& error) {
  std::vector<std::shared_ptr<OutMessage>> failed;
  for (auto it = streaming_.begin(); it != streaming_.end();) {
    if ((connection && (*it)->stream_connection != connection) || *it == active_) {
      ++it;
      continue;
    }
    failed.push_back(std::move(*it));
    it = streaming_.erase(it);
  }
  for (auto& m : failed) {
    if (m->state == OutMessage::State::kDone) continue;
    release(*m);
    if (impl_.scheduler && bulk(*m)) impl_.scheduler->end_bulk(this);
    complete(*m, m->abort_error ? *m->abort_error : error);
  }
}

bool Outbox::went_out_whole(const OutMessage& message) const {
  if (active_.get() != &message || !unit_ || !active_connection_) return false;
  if (active_connection_->bytes_handed_over() - unit_->handed_over_base < unit_->total) return false;
  return !message.chunked || message.payload_sent + unit_->payload_advance >= message.frame.payload_bytes;
}

void Outbox::finish_active(std::error_code ec) {
  if (active_ && went_out_whole(*active_)) {
    // Handed over whole before whatever ends it now: delivered, whatever came since.
    ec = {};
    active_->abort_error.reset();
  }
  if (ec && ec != asio::error::operation_aborted && active_ && !active_->abort_error && active_connection_) {
    // The stream broke under the write (its reader may not know yet): end that connection.
    // on_connection_lost completes this message with the reason and keeps the messages
    // behind it for the next connection, instead of writing them into the broken one.
    return active_connection_->fail({ErrorCode::kConnectionClosed, "writing to '" + node_id() +
                                                                        "' failed: " + ec.message()},
                                     false);
  }
  auto message = std::move(active_);
  unit_.reset();
  if (impl_.scheduler) impl_.scheduler->cancel(this);  // a grant asked for, no longer wanted
  Connection* written_on = std::exchange(active_connection_, nullptr);
  if (!message) return;
  streaming_.erase(std::remove(streaming_.begin(), streaming_.end(), message), streaming_.end());
  if (impl_.scheduler && bulk(*message)) impl_.scheduler->end_bulk(this);
  release(*message);
  std::uint64_t wire_bytes = message->bytes();
  const bool awaits_ack = !ec && !message->abort_error && written_on && message->frame.head.size() > 7 &&
                          (message->frame.head[7] & kFlagAckRequested);
  if (message->abort_error) {
    complete(*message, *message->abort_error);
  } else if (ec) {
    complete(*message, Error{ErrorCode::kConnectionClosed,
                             "connection to '" + node_id() + "' failed while sending: " + ec.message()});
  } else if (awaits_ack && !message->acked_early) {
    // Written; the send completes when the peer acknowledges it (on_acks), fails if the
    // connection ends first, and keeps its deadline. Its queue capacity is free again.
    message->state = OutMessage::State::kAwaitingAck;
    message->frame.segments.clear();  // the writer is done with the caller's memory
    message->ack_connection = written_on;
    message->acked_wire_bytes = wire_bytes;
    awaiting_ack_[message->id] = message;
  } else {
    impl_.stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
    impl_.stats.wire_bytes_sent.fetch_add(wire_bytes, std::memory_order_relaxed);
    complete(*message, SendResult{message->id, wire_bytes});
  }
  admit_waiting();
  pump();
}

}  // namespace wcomm
