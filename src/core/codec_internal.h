// Internals shared by the codec's files (header, encode, decode, control): byte-order helpers,
// msgpack sinks, UTF-8 validation, and the error plumbing from exceptions to Result.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "wcomm/codec.h"

namespace wcomm::codec_detail {

// The codec reports failures by throwing a typed CommError from deep inside the recursive
// walks; each public entry point turns it back into an Error value with run_guarded().
[[noreturn]] inline void fail(ErrorCode code, std::string message) {
  throw_error(Error{code, std::move(message)});
}

template <class F>
auto run_guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const CommError& e) {
    return Error{e.code(), e.what()};
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kMessageTooLarge, "out of memory while coding a message"};
  }
}

inline const CommConfig& limits_of(const CodecOptions& options) {
  static const CommConfig kDefaults;
  return options.limits ? *options.limits : kDefaults;
}

// Big-endian integer I/O for the fixed header.
template <class T>
inline void store_be(std::uint8_t* out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * (sizeof(T) - 1 - i)));
}
template <class T>
inline T load_be(const std::uint8_t* in) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | in[i]);
  return v;
}

// msgpack::packer stream that appends to a byte vector (the frame's head).
struct VectorSink {
  std::vector<std::uint8_t>* out;
  void write(const char* data, std::size_t size) {
    // (vector::insert's general range path costs more than the few bytes msgpack writes.)
    const std::size_t at = out->size();
    out->resize(at + size);
    std::memcpy(out->data() + at, data, size);
  }
};

// msgpack::packer stream that only counts, to measure a packed size without building it.
struct CountingSink {
  std::size_t bytes = 0;
  void write(const char*, std::size_t size) { bytes += size; }
};

// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF): what Python's
// msgpack accepts for a str, so neither side can produce a string the other rejects.
inline bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) { ++i; continue; }
    std::size_t len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (n - i < len) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

inline bool is_connection_id(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

using Packer = msgpack::packer<VectorSink>;

// Packs text in the str family (what V0.1 writes for text), refusing what a Python peer
// could not decode.
inline void pack_str(Packer& p, std::string_view s, const char* what) {
  if (!valid_utf8(s))
    fail(ErrorCode::kSerialization, std::string(what) + " is not valid UTF-8; send binary data as Bytes");
  if (s.size() > UINT32_MAX) fail(ErrorCode::kMessageTooLarge, std::string(what) + " is longer than MessagePack allows");
  p.pack_str(static_cast<std::uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

// wcomm's own names (map keys, node kinds, dtype names): ASCII by construction, so no check.
inline void pack_name(Packer& p, std::string_view name) {
  p.pack_str(static_cast<std::uint32_t>(name.size()));
  p.pack_str_body(name.data(), static_cast<std::uint32_t>(name.size()));
}

// Always the 9-byte float64 form, as Python's msgpack writes floats. msgpack-cxx's
// pack_double would write an integral double (3.0) as an integer, which is neither what V0.1
// sends nor a float when it arrives.
template <class Stream>
inline void pack_float64(Stream& stream, double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  std::uint8_t b[9];
  b[0] = 0xcb;
  store_be<std::uint64_t>(b + 1, bits);
  stream.write(reinterpret_cast<const char*>(b), sizeof b);
}

// Checks a header's size fields against the limits (shared by parse_header and the manifest
// decoders, which may be handed a header that did not come from parse_header).
void check_header_limits(const FrameHeader& header, const CommConfig& limits);

// Unpacks one whole msgpack document (exactly `bytes`, no trailing data) after a
// non-allocating structural pass, so that no length inside it is trusted before the bytes
// behind it are known to exist. `max_depth` bounds msgpack nesting; `max_elements` bounds
// any single array or map.
class UnpackedDocument;
UnpackedDocument unpack_document(std::span<const std::uint8_t> bytes, std::size_t max_depth, std::size_t max_elements,
                                 const char* what);

// The unpacked object tree. A small document lives in a zone this thread reuses (no
// allocation per message), so at most one small document per thread may be alive at a time;
// strings and binaries point into the unpacked bytes, which must outlive it.
class UnpackedDocument {
 public:
  UnpackedDocument(msgpack::object root, std::unique_ptr<msgpack::zone> own) : root_(root), own_(std::move(own)) {}
  UnpackedDocument(const UnpackedDocument&) = delete;
  UnpackedDocument& operator=(const UnpackedDocument&) = delete;
  ~UnpackedDocument();
  const msgpack::object& get() const { return root_; }

 private:
  msgpack::object root_;
  std::unique_ptr<msgpack::zone> own_;  // null: the thread's reused zone
};

inline std::string_view str_of(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

// Storage for one segment: the options' allocator if any (its result checked), else fresh
// memory. Throws what the allocator failed with.
Buffer allocate_segment(const CodecOptions& options, const SegmentSpec& spec);

// The common manifest (one bytes or tensor root, no piggypayload, canonical encoding)
// decoded without msgpack; nullopt for anything else, or anything to refuse (the general
// decoder then decides). The header's limits must have been checked.
std::optional<DecodedData> decode_small_manifest(const FrameHeader& header, std::span<const std::uint8_t> manifest,
                                                 const CodecOptions& options);
// Encodes the common manifest (as above) after the header's room in frame.head, with its
// segment; false, with frame untouched, for any other message. Byte for byte what
// encode_manifest_generally writes for it.
bool encode_small_manifest(const Value& root, const Value& piggypayload, const CodecOptions& options,
                           EncodedFrame& frame);
// Any message's manifest and segments (throws what it refuses).
void encode_manifest_generally(const Value& root, const Value& piggypayload, const CodecOptions& options,
                               EncodedFrame& frame);

// Any manifest, with every check (throws what it refuses). The same preconditions.
DecodedData decode_manifest_generally(const FrameHeader& header, std::span<const std::uint8_t> manifest,
                                      const CodecOptions& options);

// Piggypayload nesting limit of docs/wire-format.md (the metadata map itself is level 1).
inline constexpr std::size_t kMaxPiggypayloadDepth = 16;

}  // namespace wcomm::codec_detail
