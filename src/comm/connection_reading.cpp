// Connection's reading side, the ReadOwner::Sink: decoding and delivering the frames that
// whoever owns the reading brings (the loop, or a thread blocked in a recv), ACKs, and a
// frame that will not complete.
#include <spdlog/spdlog.h>

#include "comm/comm_impl.h"

namespace wcomm {

void Connection::start_reading() {
  reader_owner_.start(weak_from_this());
  start_liveness();
}

Result<DecodedData> Connection::decode(const FrameHeader& header, std::span<const std::uint8_t> manifest) {
  // A pending recv_into on this tag takes the tensors straight into the caller's memory. It
  // is claimed now (a cancel no longer takes it back), and completed by this frame. Not for a
  // frame with a retry key: a repeat of a delivered message must not touch it (deliver copies).
  struct Storage {
    Comm::Impl& impl;
    std::shared_ptr<RecvWaiter> into;
    std::size_t next_into = 0;
    std::optional<std::string> into_mismatch;
  } storage{impl_, header.flags & kFlagRetryKey ? nullptr : peer_->claim_into_waiter(header.tag)};
  CodecOptions options;
  options.limits = &impl_.spec.comm;
  options.registry = &impl_.registry;
  std::shared_lock codec_lock(impl_.codec_mutex);
  // (One pointer captured: the std::function holds it without allocating, once per frame.)
  options.allocate = [&s = storage](const SegmentSpec& spec) -> Result<Buffer> {
    if (s.into && spec.dtype) {
      if (s.next_into < s.into->into.size()) {
        const Tensor& t = s.into->into[s.next_into++];
        if (t.dtype() == *spec.dtype && t.shape() == *spec.shape) return t.buffer();
        s.into_mismatch = "tensor " + std::to_string(s.next_into - 1) + " of the message is " +
                          std::string(dtype_name(*spec.dtype)) + " with " + std::to_string(spec.shape->size()) +
                          " dims, which does not match the recv_into destination";
      } else if (!s.into_mismatch) {
        s.into_mismatch = "the message holds more tensors than recv_into was given";
      }
    }
    if (s.impl.allocator) {
      Buffer b = s.impl.allocator(spec.nbytes);
      if (b.size() != spec.nbytes) return Error{ErrorCode::kInvalidArgument, "allocator returned a wrong size"};
      return b;
    }
    return Buffer::allocate(spec.nbytes);
  };
  auto decoded = decode_data_manifest(header, manifest, options);
  codec_lock.unlock();
  if (!decoded) {
    // The reader fails with this frame refused (FrameReader::refused_tag): its error goes to
    // the recv it would have reached, this one, which waits again for it.
    if (storage.into) peer_->unclaim_into_waiter(storage.into);
    return decoded;
  }
  if (storage.into) frames_into_[header.message_id] = IntoClaim{storage.into, std::move(storage.into_mismatch)};
  // Counted against the inbound bound while it is read (chunked messages may interleave).
  peer_->charge_partial(header.frame_bytes());
  partial_charge_.fetch_add(header.frame_bytes());
  return decoded;
}

void Connection::peer_spoke() {
  if (peer_holds_it_.load(std::memory_order_relaxed) || peer_holds_it_.exchange(true)) return;
  // Sends may have waited for a connection the peer holds: the loop looks again.
  impl_.post([weak = weak_from_this()] {
    if (auto self = weak.lock(); self && !self->failed_) self->peer_->outbox().pump();
  });
}

void Connection::on_frame(Frame frame, ReadOwner::Reader reader, Later& later) {
  peer_spoke();
  const FrameHeader& header = frame.header;
  release_partial_charge(header.frame_bytes());  // delivered next (unreceived if nobody waits)
  Received message{std::move(frame.data->root), std::move(frame.data->piggypayload), header.message_id,
                   header.frame_bytes()};
  impl_.stats.messages_received.fetch_add(1, std::memory_order_relaxed);
  impl_.stats.wire_bytes_received.fetch_add(header.frame_bytes(), std::memory_order_relaxed);
  if (reader != ReadOwner::Reader::kLoop) impl_.stats.messages_read_by_receivers.fetch_add(1, std::memory_order_relaxed);
  if (reader == ReadOwner::Reader::kCallerBusyPolling)
    impl_.stats.messages_read_busy_polling.fetch_add(1, std::memory_order_relaxed);
  const bool by_loop = reader == ReadOwner::Reader::kLoop;
  bool accepted = true;
  if (auto found = frames_into_.find(header.message_id); found != frames_into_.end()) {
    IntoClaim claim = std::move(found->second);
    frames_into_.erase(found);
    if (claim.mismatch)
      accepted = peer_->complete_into_waiter(
          this, header.flags, claim.waiter,
          Error{ErrorCode::kUnsupportedPayload, "recv_into: " + *claim.mismatch + "; the message was dropped"}, by_loop,
          later);
    else
      accepted = peer_->complete_into_waiter(this, header.flags, claim.waiter, std::move(message), by_loop, later);
  } else {
    accepted = peer_->deliver(*this, header.flags, header.tag, std::move(message), by_loop, later,
                              frame.data->retry_key);
  }
  if (accepted && (header.flags & kFlagAckRequested)) {
    // Acknowledged once read whole (the sender's send completes then), on the loop.
    if (by_loop) {
      peer_->outbox().queue_ack(shared_from_this(), header.message_id);
    } else {
      impl_.post([weak = weak_from_this(), id = header.message_id] {
        if (auto self = weak.lock(); self && !self->failed_) self->peer_->outbox().queue_ack(self, id);
      });
    }
  }
}

void Connection::on_acks(const Frame& frame, ReadOwner::Reader reader) {
  peer_spoke();
  auto control = decode_control(frame.header, frame.manifest);
  if (!control || control.value().acks.empty()) return;  // nothing this side can use
  if (reader == ReadOwner::Reader::kLoop) return peer_->outbox().on_acks(control.value().acks);
  impl_.post([weak = weak_from_this(), acks = std::move(control.value().acks)] {
    if (auto self = weak.lock()) self->peer_->outbox().on_acks(acks);
  });
}

bool Connection::inbound_full() { return peer_->pause_if_full(*this); }

bool Connection::others_waiting(std::size_t own) { return peer_->recvs_waiting(own); }

void Connection::release_partial_charge(std::uint64_t bytes) {
  // The reader and the loop's fail() may both release: never more than is charged.
  std::uint64_t charged = partial_charge_.load(), take = 0;
  do {
    take = std::min(charged, bytes);
  } while (!partial_charge_.compare_exchange_weak(charged, charged - take));
  if (take) peer_->release_partial(take);
}

void Connection::abandon_frame(const Error& why, Later& later) {
  release_partial_charge(UINT64_MAX);
  auto claims = std::move(frames_into_);
  frames_into_.clear();
  // (Runs on the loop or on the last reader's thread: complete_into_waiter hands over.)
  for (auto& [id, claim] : claims)
    peer_->complete_into_waiter(nullptr, 0, claim.waiter, Error{ErrorCode::kConnectionClosed, why.message}, false, later);
}

}  // namespace wcomm
