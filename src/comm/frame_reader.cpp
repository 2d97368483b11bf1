// FrameReader: header, manifest, segments, non-blocking, one stage at a time.
#include "comm/frame_reader.h"

#include <algorithm>
#include <cstring>

#include "comm/compression.h"
#include "comm/egress.h"

namespace wcomm {

FrameReader::FrameReader(transport::Connection& connection, const CommConfig& limits)
    : connection_(connection), limits_(limits), reads_ahead_(connection.traits().reads_ahead) {}

Error FrameReader::read_error(std::error_code ec, const char* what) const {
  const bool mid_frame = !between_frames();
  // A TLS alert record (0x15 0x03...) is shorter than a frame header: a TLS node's refusal.
  if ((ec == asio::error::eof || ec == asio::error::connection_reset) && peer_speaks_tls())
    return {ErrorCode::kProtocol, who_ + " speaks TLS (comm.tls is set there) and refused this plain connection: "
                                         "set comm.tls on this node too"};
  if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    if (!mid_frame) return {ErrorCode::kConnectionClosed, who_ + " closed the connection"};
    return {ErrorCode::kConnectionClosed,
            who_ + " closed the connection mid-frame (while reading the " + std::string(what) + ")"};
  }
  return {ErrorCode::kConnectionClosed,
          "connection to " + who_ + " failed while reading the " + std::string(what) + ": " + ec.message()};
}

void FrameReader::fail(Error error) {
  if (!error_) error_ = std::move(error);
}

void FrameReader::refuse_data(std::uint32_t tag, Error error) {
  if (!error_) refused_tag_ = tag;
  fail(std::move(error));
}

FrameReader::Status FrameReader::read(const DecodeData& decode) {
  // Each stage reads what has arrived; one that cannot complete ends the call for now.
  while (!error_) {
    switch (stage_) {
      case Stage::kHeader:
        if (stage_bytes_ == 0 && !handshake_ && peek_worth_it() && take_head_from_peek(decode)) continue;
        if (!read_stage({asio::buffer(header_bytes_, kHeaderSize)}, kHeaderSize, "frame header")) break;
        on_header();
        continue;
      case Stage::kManifest:
        if (!read_stage({asio::buffer(frame_.manifest)}, frame_.manifest.size(), "manifest")) break;
        on_manifest(decode);
        continue;
      case Stage::kSegments:
        // (A large frame's payload is read where it goes, to its end.)
        if (!read_stage(segment_buffers_, segment_bytes_, "payload", segment_bytes_ < kPeekAfterFrameBytes)) break;
        if (chunk_of_ && !on_chunk_read()) continue;  // a chunk that did not end its message
        if (error_) break;
        last_frame_bytes_ = segment_bytes_;
        stage_ = Stage::kDone;
        return Status::kFrame;
      case Stage::kDone:
        return Status::kFrame;  // not taken yet
    }
    break;
  }
  return error_ ? Status::kFailed : Status::kWaiting;
}

Frame FrameReader::take() {
  Frame frame = std::move(frame_);
  frame_ = Frame{};
  segment_buffers_.clear();
  stage_ = Stage::kHeader;
  stage_bytes_ = 0;
  return frame;
}

// Reads more of the current stage; true once it is complete. What was read ahead comes
// first; when the stage still needs bytes, none are left ahead.
bool FrameReader::read_stage(const std::vector<asio::mutable_buffer>& buffers, std::size_t size, const char* what,
                             bool may_read_ahead) {
  std::error_code ec;
  if (stage_bytes_ < size && holds_bytes()) stage_bytes_ += take_ahead(buffers, size);
  if (stage_bytes_ < size) {
    // Only in a stream of small frames (after a large one, reading ahead into the next split
    // each frame's socket buffer in two reads and copied part of it twice: 64 KiB frames over
    // unix went through at 0.7x), and never during the handshake (what follows it may not be
    // frames for this reader).
    const bool ahead = may_read_ahead && reads_ahead_ && !handshake_ && last_frame_bytes_ < kPeekAfterFrameBytes &&
                       size - stage_bytes_ < kAheadBytes;
    const std::size_t got = ahead ? connection_.try_read({asio::buffer(ahead_)}, 0, ec)
                                  : connection_.try_read(buffers, stage_bytes_, ec);
    if (got) bytes_read_.fetch_add(got, std::memory_order_relaxed);
    if (ahead) {
      ahead_begin_ = 0;
      ahead_end_ = got;
      stage_bytes_ += take_ahead(buffers, size);
    } else {
      stage_bytes_ += got;
    }
  }
  if (stage_bytes_ == size) return true;
  if (ec) fail(read_error(ec, what));
  return false;
}

// Copies what was read ahead into the stage's buffers, from stage_bytes_ on, up to size.
std::size_t FrameReader::take_ahead(const std::vector<asio::mutable_buffer>& buffers, std::size_t size) {
  const std::size_t want = std::min(size - stage_bytes_, ahead_end_ - ahead_begin_);
  std::size_t done = 0, skip = stage_bytes_;
  for (const auto& b : buffers) {
    if (done == want) break;
    if (skip >= b.size()) {
      skip -= b.size();
      continue;
    }
    const std::size_t n = std::min(b.size() - skip, want - done);
    std::memcpy(static_cast<std::uint8_t*>(b.data()) + skip, ahead_.data() + ahead_begin_ + done, n);
    done += n;
    skip = 0;
  }
  ahead_begin_ += done;
  return done;
}

// Bytes read ahead come first (a peek would see what follows them). Where the transport
// reads ahead, small frames are read several at a time; after a large frame a peek takes the
// next head, and the payload goes straight to its storage. Where a peek's cost grows with
// what is queued (a Unix socket), it is only worth it after large frames: few of those fit in
// the queue, while a stream of small ones made each peek slow (1 KiB messages over unix ran at
// 0.63-0.93x tcp with the peek, 0.94-1.19x without).
bool FrameReader::peek_worth_it() const {
  if (holds_bytes()) return false;
  if (reads_ahead_ && last_frame_bytes_ < kPeekAfterFrameBytes) return false;
  return connection_.traits().cheap_peek || last_frame_bytes_ >= kPeekAfterFrameBytes;
}

// A peek at the next DATA frame usually holds its header and manifest whole: then they are
// read together with the payload, one system call instead of three.
bool FrameReader::take_head_from_peek(const DecodeData& decode) {
  std::error_code ec;
  const std::size_t got = connection_.try_peek(head_peek_.data(), head_peek_.size(), ec);
  if (got < kHeaderSize) return false;  // the stage-by-stage reads take it (and report ec)
  auto header = parse_header(head_peek_.data(), limits_);
  if (!header || header.value().kind != FrameKind::kData || (header.value().flags & (kFlagChunked | kFlagSupersedes | kFlagRetryKey)) ||
      open_.count(header.value().message_id) || kHeaderSize + header.value().manifest_size > got)
    return false;
  frame_.header = header.value();
  const std::size_t head = kHeaderSize + frame_.header.manifest_size;
  auto decoded = decode(frame_.header, std::span<const std::uint8_t>(head_peek_.data() + kHeaderSize,
                                                                     frame_.header.manifest_size));
  if (!decoded) {
    refuse_data(frame_.header.tag, decoded.error());
    return true;
  }
  frame_.data.emplace(std::move(decoded).value());
  read_segments_next(head);  // the head is read again, over the peek
  return true;
}

// The next stage reads the frame's segments (and first, over the peek buffer, `head` bytes).
void FrameReader::read_segments_next(std::size_t head) {
  segment_buffers_.clear();
  segment_bytes_ = head;
  if (head) segment_buffers_.emplace_back(head_peek_.data(), head);
  if (frame_.data)
    for (const Buffer& b : frame_.data->segments)
      if (b.size()) {
        segment_buffers_.emplace_back(b.data(), b.size());
        segment_bytes_ += b.size();
      }
  stage_ = Stage::kSegments;
  stage_bytes_ = 0;
}

void FrameReader::on_header() {
  auto header = parse_header(header_bytes_, limits_);
  if (!header) {
    // A well-formed DATA header announcing more than the limits allow: that frame is refused.
    const auto kind = static_cast<FrameKind>(header_bytes_[6]);
    const std::uint32_t tag = std::uint32_t{header_bytes_[8]} << 24 | std::uint32_t{header_bytes_[9]} << 16 |
                              std::uint32_t{header_bytes_[10]} << 8 | header_bytes_[11];
    if (header.error().code == ErrorCode::kMessageTooLarge && kind == FrameKind::kData && !handshake_)
      return refuse_data(tag, header.error());
    return fail(header.error());
  }
  frame_.header = header.value();
  if (frame_.header.kind == FrameKind::kChunk && !handshake_) return on_chunk_header();
  // A message_id names one message while it is open (its recv_into claim is keyed by it).
  if (frame_.header.kind == FrameKind::kData && open_.count(frame_.header.message_id))
    return fail({ErrorCode::kProtocol, "a DATA frame reuses message_id " + std::to_string(frame_.header.message_id) +
                                           " of a chunked message still open"});
  if ((frame_.header.flags & kFlagChunked) && !extensions_.chunks)
    return fail({ErrorCode::kProtocol, "a chunked DATA frame on a connection that did not negotiate \"chunks\""});
  if ((frame_.header.flags & kFlagSupersedes) && !extensions_.supersede)
    return fail({ErrorCode::kProtocol, "a DATA frame flagged 0x10 on a connection that did not negotiate \"supersede\""});
  if ((frame_.header.flags & kFlagRetryKey) && !extensions_.retry_keys)
    return fail({ErrorCode::kProtocol, "a DATA frame flagged 0x08 on a connection that did not negotiate \"retry-key\""});
  if (handshake_ && (frame_.header.kind == FrameKind::kData || frame_.header.kind == FrameKind::kChunk))
    return fail({ErrorCode::kProtocol, "a DATA frame before the handshake completed"});
  if (handshake_ && frame_.header.manifest_size > kHandshakeManifestBytes)
    return fail({ErrorCode::kProtocol, "a handshake frame announces a " + std::to_string(frame_.header.manifest_size) +
                                           "-byte manifest (at most " + std::to_string(kHandshakeManifestBytes) + ")"});
  frame_.manifest.resize(frame_.header.manifest_size);  // bounded by max_manifest_bytes in parse_header
  stage_ = Stage::kManifest;
  stage_bytes_ = 0;
}

void FrameReader::on_manifest(const DecodeData& decode) {
  if (frame_.header.kind == FrameKind::kData) {
    auto decoded = decode(frame_.header, frame_.manifest);
    if (!decoded) return refuse_data(frame_.header.tag, decoded.error());
    frame_.data.emplace(std::move(decoded).value());
    frame_.manifest.clear();
    if (frame_.header.flags & kFlagChunked) return open_chunked();
  }
  read_segments_next(0);
}

// A chunked DATA frame ends after its manifest: its storage waits in open_ for its CHUNKs.
void FrameReader::open_chunked() {
  const std::uint64_t id = frame_.header.message_id;
  if (open_.count(id))
    return fail({ErrorCode::kProtocol, "message " + std::to_string(id) + " announced twice while still open"});
  if (open_.size() >= kMaxOpenMessages)
    return fail({ErrorCode::kProtocol, "more than " + std::to_string(kMaxOpenMessages) +
                                           " chunked messages open at once"});
  if (frame_.header.payload_size == 0) {  // nothing to wait for
    read_segments_next(0);
    return;
  }
  OpenMessage open;
  for (const Buffer& b : frame_.data->segments)
    if (b.size()) open.buffers.emplace_back(b.data(), b.size());
  open.frame = std::move(frame_);
  open_.emplace(id, std::move(open));
  frame_ = Frame{};
  stage_ = Stage::kHeader;
  stage_bytes_ = 0;
}

void FrameReader::on_chunk_header() {
  const FrameHeader& h = frame_.header;
  if (!extensions_.chunks) return fail({ErrorCode::kProtocol, "a CHUNK frame on a connection that did not negotiate \"chunks\""});
  if ((h.flags & kFlagCompressed) && !extensions_.zstd)
    return fail({ErrorCode::kProtocol, "a compressed CHUNK on a connection that did not negotiate \"zstd\""});
  if (h.manifest_size != 0 || h.segment_count != 0 || h.payload_size == 0)
    return fail({ErrorCode::kProtocol, "a CHUNK frame must have no manifest, no segments and some payload"});
  auto found = open_.find(h.message_id);
  if (found == open_.end())
    return fail({ErrorCode::kProtocol, "a CHUNK for message " + std::to_string(h.message_id) + ", which is not open"});
  OpenMessage& open = found->second;
  const std::uint64_t left = open.frame.header.payload_size - open.received;
  if (h.tag != open.frame.header.tag || h.payload_size > left)
    return fail({ErrorCode::kProtocol, "a CHUNK of " + std::to_string(h.payload_size) + " bytes for message " +
                                           std::to_string(h.message_id) + " (tag " + std::to_string(h.tag) +
                                           "), which has " + std::to_string(left) + " bytes left on tag " +
                                           std::to_string(open.frame.header.tag)});
  chunk_of_ = h.message_id;
  segment_buffers_.clear();
  if (h.flags & kFlagCompressed) {
    compressed_.resize(h.payload_size);
    segment_buffers_.emplace_back(compressed_.data(), compressed_.size());
  } else {
    // Straight into the destination, where the previous chunk ended.
    segment_buffers_ = slice_buffers(open.buffers, open.received, h.payload_size);
  }
  segment_bytes_ = h.payload_size;
  stage_ = Stage::kSegments;
  stage_bytes_ = 0;
}

bool FrameReader::on_chunk_read() {
  const FrameHeader h = frame_.header;
  const std::uint64_t id = *chunk_of_;
  chunk_of_.reset();
  OpenMessage& open = open_.at(id);
  std::uint64_t got = h.payload_size;
  if (h.flags & kFlagCompressed) {
    // The zstd frame names its length; it must fit what is left of the message.
    const auto rest = slice_buffers(open.buffers, open.received, open.frame.header.payload_size - open.received);
    auto n = decompress_chunk(compressed_.data(), compressed_.size(), rest);
    if (!n) {
      fail(n.error());
      return true;
    }
    got = n.value();
    if (decompressed_) decompressed_->fetch_add(got, std::memory_order_relaxed);
  }
  open.received += got;
  segment_buffers_.clear();
  if (open.received < open.frame.header.payload_size) {
    frame_ = Frame{};
    stage_ = Stage::kHeader;
    stage_bytes_ = 0;
    return false;
  }
  frame_ = std::move(open.frame);
  open_.erase(id);
  return true;
}

std::vector<std::uint64_t> FrameReader::open_message_ids() const {
  std::vector<std::uint64_t> ids;
  for (const auto& [id, open] : open_) ids.push_back(id);
  return ids;
}

}  // namespace wcomm
