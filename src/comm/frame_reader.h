// FrameReader: reads COMM v1 frames from a transport connection, HELLO and DATA alike: the
// header (checked against the limits before anything is allocated), the manifest, then the
// segments straight into the storage the DATA decoder chose. Non-blocking: each call reads
// what has arrived and keeps its place. Used by one thread at a time (see ReadOwner).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <unordered_map>

#include "transport/transport.h"
#include "wcomm/codec.h"

namespace wcomm {

struct Frame {
  FrameHeader header;
  std::vector<std::uint8_t> manifest;  // control frames (HELLO, HELLO_ACK, CLOSE)
  std::optional<DecodedData> data;     // DATA frames, decoded, with their segments filled
};

class FrameReader {
 public:
  enum class Status { kFrame, kWaiting, kFailed };
  // Decodes a DATA frame's manifest into the storage its segments are read into.
  using DecodeData = std::function<Result<DecodedData>(const FrameHeader&, std::span<const std::uint8_t>)>;

  FrameReader(transport::Connection& connection, const CommConfig& limits);
  // Who is on the other side, for error messages ("peer 'node-b'").
  void set_peer_name(std::string who) { who_ = std::move(who); }
  // Before the handshake completes only small control frames are read: a header announcing
  // anything else (a DATA frame, a large manifest) fails before a byte of it is allocated.
  static constexpr std::uint32_t kHandshakeManifestBytes = 4096;
  void set_handshake(bool on) { handshake_ = on; }
  // Negotiated extensions: chunked DATA frames with CHUNK frames ("chunks"), compressed
  // chunks ("zstd"), the supersede flag ("supersede"), retry keys ("retry-key"). Without them
  // such frames are protocol errors.
  struct Extensions {
    bool chunks = false, zstd = false, supersede = false, retry_keys = false;
  };
  // decompressed: counts the bytes decompressed (stats), may be null.
  void set_extensions(Extensions extensions, std::atomic<std::uint64_t>* decompressed = nullptr) {
    extensions_ = extensions;
    decompressed_ = decompressed;
  }
  // At most this many chunked messages may be open (announced, not yet complete) at once.
  static constexpr std::size_t kMaxOpenMessages = 64;
  // The messages announced as chunked and not complete (their storage is taken): abandoned
  // with the connection, their ids.
  std::vector<std::uint64_t> open_message_ids() const;

  // Reads until a whole frame is there (kFrame: take() it), nothing more has arrived
  // (kWaiting) or the stream failed, ended, or sent a frame the limits refuse (kFailed:
  // error(); sticky).
  Status read(const DecodeData& decode);
  Frame take();
  const Error& error() const { return *error_; }
  // Ends reading with this error (a frame the reader's user refuses); sticky.
  void fail_with(Error error) { fail(std::move(error)); }
  const std::string& peer_name() const { return who_; }
  bool failed() const { return error_.has_value(); }
  // After kFailed: the tag of the DATA frame the limits or its decoder refused (its header
  // was read: it announced too large a frame, or its manifest did not decode). The failure
  // belongs to that frame, and reaches the recv that would have received it
  // (PeerSession::on_connection_lost, PeerState::fail_recvs_after_loss). None when the stream itself broke.
  std::optional<std::uint32_t> refused_tag() const { return refused_tag_; }
  bool between_frames() const { return stage_ == Stage::kHeader && stage_bytes_ == 0; }
  // The peer answered with a TLS record where a frame header belongs (it has comm.tls and
  // this node has not): a retry would get the same answer.
  bool peer_speaks_tls() const {
    return stage_ == Stage::kHeader && stage_bytes_ >= 2 && (header_bytes_[0] == 0x15 || header_bytes_[0] == 0x16) &&
           header_bytes_[1] == 0x03;
  }
  // Any thread: bytes read so far (liveness: the loop watches it move).
  std::uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  // Whether bytes read ahead wait here, not in the transport (a reader that stops with
  // kFrame or after taking one may leave some; one that gets kWaiting never does). The
  // reader only.
  bool holds_bytes() const { return ahead_begin_ < ahead_end_; }

 private:
  enum class Stage { kHeader, kManifest, kSegments, kDone };
  bool read_stage(const std::vector<asio::mutable_buffer>& buffers, std::size_t size, const char* what,
                  bool may_read_ahead = true);
  std::size_t take_ahead(const std::vector<asio::mutable_buffer>& buffers, std::size_t size);
  bool peek_worth_it() const;
  bool take_head_from_peek(const DecodeData& decode);
  void on_header();
  void on_manifest(const DecodeData& decode);
  void read_segments_next(std::size_t head);
  void on_chunk_header();
  bool on_chunk_read();  // true: the chunk completed its message (frame_ holds it)
  void open_chunked();
  void fail(Error error);
  Error read_error(std::error_code ec, const char* what) const;

  transport::Connection& connection_;
  const CommConfig& limits_;
  std::string who_ = "the remote side";
  Stage stage_ = Stage::kHeader;
  std::size_t stage_bytes_ = 0;  // of the current stage, read so far
  std::uint8_t header_bytes_[kHeaderSize];
  Frame frame_;
  std::vector<asio::mutable_buffer> segment_buffers_;
  std::size_t segment_bytes_ = 0;
  std::size_t last_frame_bytes_ = 0;  // the last complete frame's head and payload (peek_worth_it)
  static constexpr std::size_t kPeekAfterFrameBytes = 16u << 10;
  std::array<std::uint8_t, 4096> head_peek_;
  // Read ahead (transport::Connection::Traits::reads_ahead, after the handshake): [begin, end) of
  // ahead_ is what was read and not yet taken by a stage. A stage smaller than ahead_ is
  // filled from one read into it; a larger one is read where it goes.
  const bool reads_ahead_;
  static constexpr std::size_t kAheadBytes = 4096;
  std::array<std::uint8_t, kAheadBytes> ahead_;
  std::size_t ahead_begin_ = 0, ahead_end_ = 0;
  std::optional<Error> error_;
  std::optional<std::uint32_t> refused_tag_;
  void refuse_data(std::uint32_t tag, Error error);
  std::atomic<std::uint64_t> bytes_read_{0};
  bool handshake_ = false;
  Extensions extensions_;
  // Chunked messages being reassembled, by message_id: the decoded frame (its storage is the
  // destination) and how much of its payload has come.
  struct OpenMessage {
    Frame frame;
    std::vector<asio::mutable_buffer> buffers;
    std::uint64_t received = 0;
  };
  std::unordered_map<std::uint64_t, OpenMessage> open_;
  std::optional<std::uint64_t> chunk_of_;  // the CHUNK being read belongs to this message
  std::vector<std::uint8_t> compressed_;   // a compressed chunk, before it is decompressed
  std::atomic<std::uint64_t>* decompressed_ = nullptr;
};

}  // namespace wcomm
