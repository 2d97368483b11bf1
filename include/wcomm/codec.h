// The COMM v1 codec (docs/wire-format.md): frame headers, DATA manifests with zero-copy
// segments, and the HELLO / HELLO_ACK / CLOSE control frames. No I/O: callers move the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wcomm/config.h"
#include "wcomm/errors.h"
#include "wcomm/tensor.h"
#include "wcomm/value.h"

namespace wcomm {

inline constexpr std::size_t kHeaderSize = 36;
inline constexpr std::uint16_t kProtocolVersion = 1;

// kHeartbeat is a wcomm extension, sent only to peers whose HELLO / HELLO_ACK listed the
// "heartbeat" feature (docs/wire-format.md); a V0.1 peer never sees it.
// kAck likewise, to peers that listed "ack": it acknowledges DATA frames that asked for it.
// kAuth likewise, to peers that listed "auth=": the dialer's proof of the cluster key.
// kChunk likewise, to peers that listed "chunks": a piece of a chunked DATA frame's payload.
enum class FrameKind : std::uint8_t {
  kHello = 1, kHelloAck = 2, kClose = 3, kData = 16, kHeartbeat = 32, kAck = 33, kAuth = 34, kChunk = 35
};
// DATA header flag (wcomm extension, "ack" feature): the sender asks for an ACK of this frame.
inline constexpr std::uint8_t kFlagAckRequested = 0x80;
// DATA header flag ("chunks" feature): the frame ends after its manifest; its payload follows
// in CHUNK frames with the same message_id, which other frames may come between.
inline constexpr std::uint8_t kFlagChunked = 0x40;
// DATA header flag ("supersede" feature): the sender has left every other connection to this
// receiver; frames still arriving on those are older, and the receiver drops them.
inline constexpr std::uint8_t kFlagSupersedes = 0x10;
// DATA header flag ("retry-key" feature): the manifest has a fourth key, "retry_key" (an
// unsigned integer the sending application chose); a receiver delivers one message per
// (sender, retry_key) and acknowledges, unread, a repeat of one it delivered.
inline constexpr std::uint8_t kFlagRetryKey = 0x08;
// CHUNK header flag ("zstd" feature): the chunk's bytes are one zstd frame that decompresses
// to the next bytes of the message's payload.
inline constexpr std::uint8_t kFlagCompressed = 0x20;

struct FrameHeader {
  FrameKind kind = FrameKind::kData;
  std::uint8_t flags = 0;  // 0; DATA: kFlagAckRequested, kFlagChunked; CHUNK: kFlagCompressed
  std::uint32_t tag = 0;
  std::uint64_t message_id = 0;
  std::uint32_t manifest_size = 0;
  std::uint32_t segment_count = 0;
  std::uint64_t payload_size = 0;
  std::uint64_t frame_bytes() const { return kHeaderSize + manifest_size + payload_size; }
};

void write_header(const FrameHeader& header, std::uint8_t out[kHeaderSize]);
// Checks magic, version, kind, flags, and the size fields against the limits, from the header
// alone: ProtocolError (also for a segment_count over max_segments, which no honest encoder
// produces), or MessageTooLargeError for a manifest / frame over its limit.
Result<FrameHeader> parse_header(const std::uint8_t in[kHeaderSize], const CommConfig& limits);

// Registered record ("dataclass") and custom types, by type_id. A value of an unregistered
// type_id (or another version) is refused on encode and decode with UnknownCodecError.
class TypeRegistry {
 public:
  enum class Kind { kRecord, kCustom };
  void add(Kind kind, const std::string& type_id, std::uint32_t version);
  bool contains(Kind kind, const std::string& type_id, std::uint32_t version) const;

 private:
  std::map<std::string, std::pair<Kind, std::uint32_t>> types_;
};

// What the decoder asks for when it needs storage for one segment.
struct SegmentSpec {
  std::size_t index;             // segment number
  std::size_t nbytes;
  std::optional<DType> dtype;    // set for a tensor segment
  const Shape* shape = nullptr;  // set for a tensor segment
};
// Returns storage of exactly spec.nbytes bytes (or an Error, which fails the decode).
using SegmentAllocator = std::function<Result<Buffer>(const SegmentSpec& spec)>;

struct CodecOptions {
  const CommConfig* limits = nullptr;         // nullptr: CommConfig's defaults
  const TypeRegistry* registry = nullptr;     // nullptr: no record / custom types
  SegmentAllocator allocate = {};             // empty: Buffer::allocate
  std::optional<std::uint64_t> retry_key;     // encode_data: carried in the manifest (kFlagRetryKey)
};

// A DATA frame ready for one gather write: `head` holds header + manifest; `segments` view
// the value's own memory (no copies) and keep its owners alive.
struct EncodedFrame {
  std::vector<std::uint8_t> head;
  std::vector<Buffer> segments;
  std::uint64_t payload_bytes = 0;
  std::uint64_t wire_bytes() const { return head.size() + payload_bytes; }
};

// Encodes a DATA frame. Errors: MessageTooLargeError (frame, manifest, segment count or
// piggypayload over its limit), SerializationError (container depth / node count, bad
// piggypayload shape), UnknownCodecError (unregistered type_id), UnsupportedPayloadError
// (pickle without allow_unsafe_pickle).
Result<EncodedFrame> encode_data(const Value& root, const Value& piggypayload, std::uint32_t tag,
                                 std::uint64_t message_id, const CodecOptions& options = {});

// A DATA manifest decoded into the value's skeleton. Every bytes / tensor / pickle node
// already owns its (allocated, unfilled) storage; `segments` lists those buffers in segment
// order, so a reader can fill them straight from the socket.
struct DecodedData {
  Value root;
  Value piggypayload;
  std::vector<Buffer> segments;
  std::optional<std::uint64_t> retry_key;  // a frame flagged kFlagRetryKey
};
// Errors: ProtocolError for anything malformed or inconsistent with the header,
// MessageTooLargeError for limits, UnknownCodecError, UnsupportedPayloadError (pickle without
// allow_unsafe_pickle).
Result<DecodedData> decode_data_manifest(const FrameHeader& header, std::span<const std::uint8_t> manifest,
                                         const CodecOptions& options = {});

// The control map of HELLO / HELLO_ACK (and CLOSE or HEARTBEAT, whose map may be empty).
struct Control {
  std::string node_id;
  std::string connection_id;          // 32 lowercase hex chars
  std::vector<std::string> features;  // wcomm extension; absent on the wire when empty
  std::vector<std::uint64_t> acks;    // ACK: the message_ids acknowledged; absent when empty
};
// The whole control frame (header with tag 0 and message_id 0, then the manifest). Throws
// InvalidArgumentError for kData, or for a HELLO / HELLO_ACK without a node_id or whose
// connection_id is not 32 lowercase hex chars. CLOSE carries only the fields that are set.
std::vector<std::uint8_t> encode_control(FrameKind kind, const Control& control);
// ProtocolError for a malformed control manifest, segments on a control frame, or a handshake
// without node_id / a well-formed connection_id; unknown keys are ignored.
Result<Control> decode_control(const FrameHeader& header, std::span<const std::uint8_t> manifest);

// Whole-frame helpers for tests, fuzzing and tools.
struct DecodedFrame {
  FrameHeader header;
  Value root;
  Value piggypayload;
  std::optional<Control> control;
};
Result<DecodedFrame> decode_frame(std::span<const std::uint8_t> frame, const CodecOptions& options = {});
std::vector<std::uint8_t> flatten(const EncodedFrame& frame);

}  // namespace wcomm
