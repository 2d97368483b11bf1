// COMM v1 frame level: the 36-byte header, its limit checks, the type registry, and the
// whole-frame helpers (decode_frame, flatten) used by tests, fuzzing and tools.
#include <cstring>

#include "core/codec_internal.h"
#include "wcomm/codec.h"

namespace wcomm {

using codec_detail::fail;
using codec_detail::load_be;
using codec_detail::store_be;

namespace {
constexpr std::uint8_t kMagic[4] = {'C', 'O', 'M', 'M'};

std::string hex_bytes(const std::uint8_t* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}
}  // namespace

void write_header(const FrameHeader& header, std::uint8_t out[kHeaderSize]) {
  std::memcpy(out, kMagic, 4);
  store_be<std::uint16_t>(out + 4, kProtocolVersion);
  out[6] = static_cast<std::uint8_t>(header.kind);
  out[7] = header.flags;
  store_be<std::uint32_t>(out + 8, header.tag);
  store_be<std::uint64_t>(out + 12, header.message_id);
  store_be<std::uint32_t>(out + 20, header.manifest_size);
  store_be<std::uint32_t>(out + 24, header.segment_count);
  store_be<std::uint64_t>(out + 28, header.payload_size);
}

void codec_detail::check_header_limits(const FrameHeader& h, const CommConfig& limits) {
  if (h.manifest_size > limits.max_manifest_bytes)
    fail(ErrorCode::kMessageTooLarge, "manifest of " + std::to_string(h.manifest_size) +
                                          " bytes exceeds max_manifest_bytes (" +
                                          std::to_string(limits.max_manifest_bytes) + ")");
  // A segment count over the limit is a protocol error (as the V0.1 receiver treats it and
  // the invalid/too_many_segments vector expects), not a size error: no honest sender
  // produces one, since encoders refuse such messages.
  if (h.segment_count > limits.max_segments)
    fail(ErrorCode::kProtocol, "frame declares " + std::to_string(h.segment_count) +
                                   " segments, more than max_segments (" +
                                   std::to_string(limits.max_segments) + ")");
  // Computed without overflow: payload_size is a peer-controlled u64.
  std::uint64_t fixed = kHeaderSize + static_cast<std::uint64_t>(h.manifest_size);
  if (fixed > limits.max_message_bytes || h.payload_size > limits.max_message_bytes - fixed) {
    std::string total = h.payload_size > UINT64_MAX - fixed ? "more than 2^64" : std::to_string(fixed + h.payload_size);
    fail(ErrorCode::kMessageTooLarge, "frame of " + total + " bytes (payload " + std::to_string(h.payload_size) +
                                          ") exceeds max_message_bytes (" +
                                          std::to_string(limits.max_message_bytes) + ")");
  }
}

Result<FrameHeader> parse_header(const std::uint8_t in[kHeaderSize], const CommConfig& limits) {
  return codec_detail::run_guarded([&]() -> Result<FrameHeader> {
    // A TLS record (handshake 0x16 or alert 0x15, version 3.x): a peer with comm.tls set.
    if (std::memcmp(in, kMagic, 4) != 0 && (in[0] == 0x16 || in[0] == 0x15) && in[1] == 0x03)
      fail(ErrorCode::kProtocol, "bad frame magic " + hex_bytes(in, 4) +
                                     ": the peer speaks TLS (comm.tls is set there): set comm.tls on this node too");
    if (std::memcmp(in, kMagic, 4) != 0)
      fail(ErrorCode::kProtocol, "bad frame magic " + hex_bytes(in, 4) + " (expected 'COMM'); the peer does not speak COMM v1");
    auto version = load_be<std::uint16_t>(in + 4);
    if (version != kProtocolVersion)
      fail(ErrorCode::kProtocol, "unsupported protocol version " + std::to_string(version) + " (expected 1)");
    FrameHeader h;
    std::uint8_t kind = in[6];
    switch (kind) {
      case 1: case 2: case 3: case 16: case 32: case 33: case 34: case 35: h.kind = static_cast<FrameKind>(kind); break;
      default: fail(ErrorCode::kProtocol, "unknown frame kind " + std::to_string(kind));
    }
    // Extension flags (negotiated; the reader refuses one a connection did not negotiate).
    const std::uint8_t allowed = h.kind == FrameKind::kData    ? (kFlagAckRequested | kFlagChunked | kFlagSupersedes | kFlagRetryKey)
                                 : h.kind == FrameKind::kChunk ? kFlagCompressed
                                                               : 0;
    if ((in[7] & ~allowed) != 0)
      fail(ErrorCode::kProtocol, "frame flags must be 0, got " + std::to_string(in[7]));
    h.flags = in[7];
    h.tag = load_be<std::uint32_t>(in + 8);
    h.message_id = load_be<std::uint64_t>(in + 12);
    h.manifest_size = load_be<std::uint32_t>(in + 20);
    h.segment_count = load_be<std::uint32_t>(in + 24);
    h.payload_size = load_be<std::uint64_t>(in + 28);
    codec_detail::check_header_limits(h, limits);
    return h;
  });
}

void TypeRegistry::add(Kind kind, const std::string& type_id, std::uint32_t version) {
  // One type_id names one type: registering it again replaces the earlier entry.
  types_[type_id] = {kind, version};
}

bool TypeRegistry::contains(Kind kind, const std::string& type_id, std::uint32_t version) const {
  auto it = types_.find(type_id);
  return it != types_.end() && it->second.first == kind && it->second.second == version;
}

std::vector<std::uint8_t> flatten(const EncodedFrame& frame) {
  std::vector<std::uint8_t> out;
  out.reserve(frame.wire_bytes());
  out.insert(out.end(), frame.head.begin(), frame.head.end());
  for (const auto& s : frame.segments) out.insert(out.end(), s.data(), s.data() + s.size());
  return out;
}

Result<DecodedFrame> decode_frame(std::span<const std::uint8_t> frame, const CodecOptions& options) {
  return codec_detail::run_guarded([&]() -> Result<DecodedFrame> {
    if (frame.size() < kHeaderSize)
      fail(ErrorCode::kProtocol, "truncated frame: " + std::to_string(frame.size()) + " bytes, shorter than the " +
                                     std::to_string(kHeaderSize) + "-byte header");
    const CommConfig& limits = codec_detail::limits_of(options);
    // Header limits come first, so an oversized frame is reported as such even when only its
    // header is at hand.
    auto header = parse_header(frame.data(), limits);
    if (!header) return header.error();
    DecodedFrame out;
    out.header = header.value();
    const FrameHeader& h = out.header;
    if (frame.size() != h.frame_bytes())
      fail(ErrorCode::kProtocol, std::string(frame.size() < h.frame_bytes() ? "truncated" : "overlong") +
                                     " frame: " + std::to_string(frame.size()) + " bytes, but its header declares " +
                                     std::to_string(h.frame_bytes()));
    auto manifest = frame.subspan(kHeaderSize, h.manifest_size);
    if (h.kind != FrameKind::kData) {
      auto control = decode_control(h, manifest);
      if (!control) return control.error();
      out.control = std::move(control.value());
      return out;
    }
    auto data = decode_data_manifest(h, manifest, options);
    if (!data) return data.error();
    std::size_t offset = kHeaderSize + h.manifest_size;
    for (auto& segment : data.value().segments) {
      if (segment.size()) std::memcpy(segment.data(), frame.data() + offset, segment.size());
      offset += segment.size();
    }
    out.root = std::move(data.value().root);
    out.piggypayload = std::move(data.value().piggypayload);
    return out;
  });
}

}  // namespace wcomm
