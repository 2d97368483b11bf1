// The common DATA manifest, encoded and decoded without msgpack: a root that is one bytes or
// one tensor node, no piggypayload, one segment. Most messages between ML nodes are exactly
// that, and the general codec (the packer's many small writes; two msgpack passes and an
// object tree to decode) costs more than the rest of a small message's path. The encoder
// writes the canonical bytes the general encoder writes; the decoder matches them byte by
// byte, in the key order every encoder writes. Anything else, or anything to refuse, is left
// to the general codec, which gives the precise error. Whatever the decoder accepts, the
// general decoder decodes to the same value (codec_small_manifest_test.cpp checks both).
#include <cstring>
#include <limits>

#include "core/codec_internal.h"

namespace wcomm::codec_detail {

namespace {

// A cursor over the manifest; every read is bounds-checked and leaves ok() false past the end.
class Cursor {
 public:
  explicit Cursor(std::span<const std::uint8_t> bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool at_end() const { return p_ == end_; }
  // The next byte, not taken (0xc1, never used by msgpack, past the end).
  std::uint8_t peek() const { return p_ && p_ != end_ ? *p_ : 0xc1; }

  // The exact bytes `expected` (a msgpack fragment written by the encoder).
  bool literal(std::string_view expected) {
    if (!take(expected.size())) return false;
    return std::memcmp(p_ - expected.size(), expected.data(), expected.size()) == 0 || fail();
  }
  // A non-negative integer in any of msgpack's unsigned forms.
  bool uint(std::uint64_t& out) {
    if (!take(1)) return false;
    const std::uint8_t b = p_[-1];
    if (b <= 0x7f) return out = b, true;
    const std::size_t width = b == 0xcc ? 1 : b == 0xcd ? 2 : b == 0xce ? 4 : b == 0xcf ? 8 : 0;
    if (width == 0 || !take(width)) return fail();
    out = 0;
    for (std::size_t i = width; i > 0; --i) out = (out << 8) | p_[-std::ptrdiff_t(i)];
    return true;
  }
  // A fixstr (up to 31 bytes: every dtype name).
  bool short_str(std::string_view& out) {
    if (!take(1)) return false;
    const std::uint8_t b = p_[-1];
    if ((b & 0xe0) != 0xa0) return fail();
    const std::size_t n = b & 0x1f;
    if (!take(n)) return false;
    out = {reinterpret_cast<const char*>(p_ - n), n};
    return true;
  }
  // A fixarray's length (up to 15 elements).
  bool short_array(std::size_t& n) {
    if (!take(1)) return false;
    const std::uint8_t b = p_[-1];
    if ((b & 0xf0) != 0x90) return fail();
    n = b & 0x0f;
    return true;
  }

 private:
  bool take(std::size_t n) {
    if (!p_ || std::size_t(end_ - p_) < n) return fail();
    p_ += n;
    return true;
  }
  bool fail() {
    p_ = nullptr;
    return false;
  }
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

using namespace std::string_view_literals;
constexpr auto kRoot = "\x83\xa4root"sv;                   // {"root":
constexpr auto kBytesNode = "\x93\xa5" "bytes" "\x00"sv;    // ["bytes", 0, (nbytes)]
constexpr auto kTensorNode = "\x95\xa6" "tensor" "\x00"sv;  // ["tensor", 0, (nbytes, dtype, shape)]
// , "piggypayload": nil, "segments": [(one length)]}
constexpr auto kTail = "\xacpiggypayload\xc0\xa8segments\x91"sv;

}  // namespace

bool encode_small_manifest(const Value& root, const Value& piggypayload, const CodecOptions& options,
                           EncodedFrame& frame) {
  const CommConfig& limits = limits_of(options);
  if (!piggypayload.is_none() || limits.max_segments < 1 || limits.max_container_nodes < 1) return false;
  const Bytes* bytes = std::get_if<Bytes>(&root.variant());
  const Tensor* tensor = std::get_if<Tensor>(&root.variant());
  if (tensor) {
    const auto needed = tensor_nbytes(tensor->dtype(), tensor->shape());
    // (Over 15 dims the small decoder would not take it; a bad tensor's error is the general encoder's.)
    if (tensor->shape().size() > 15 || !needed || *needed != tensor->nbytes()) return false;
  } else if (!bytes) {
    return false;
  }
  const Buffer& segment = tensor ? tensor->buffer() : bytes->buffer;
  // The fixed parts in one write each; integers, names and the shape by msgpack's packer
  // (the general encoder's, so the bytes are its bytes).
  VectorSink sink{&frame.head};
  Packer p(sink);
  const auto fixed = [&](std::string_view part) { sink.write(part.data(), part.size()); };
  fixed(kRoot);
  if (tensor) {
    fixed(kTensorNode);
    p.pack_uint64(segment.size());
    pack_name(p, dtype_name(tensor->dtype()));
    p.pack_array(static_cast<std::uint32_t>(tensor->shape().size()));
    for (auto d : tensor->shape()) p.pack_int64(d);
  } else {
    fixed(kBytesNode);
    p.pack_uint64(segment.size());
  }
  fixed(kTail);
  p.pack_uint64(segment.size());
  frame.segments.push_back(segment);
  frame.payload_bytes = segment.size();
  return true;
}

std::optional<DecodedData> decode_small_manifest(const FrameHeader& header, std::span<const std::uint8_t> manifest,
                                                 const CodecOptions& options) {
  if (header.segment_count != 1 || limits_of(options).max_container_nodes < 1) return std::nullopt;
  Cursor c(manifest);
  std::uint64_t nbytes = 0, segment = 0;
  std::optional<DType> dtype;
  Shape shape;
  if (!c.literal(kRoot)) return std::nullopt;
  if (c.peek() == std::uint8_t(kBytesNode[0])) {
    if (!c.literal(kBytesNode) || !c.uint(nbytes)) return std::nullopt;
  } else {
    std::string_view dtype_name;
    std::size_t dims = 0;
    if (!c.literal(kTensorNode) || !c.uint(nbytes) || !c.short_str(dtype_name) || !c.short_array(dims))
      return std::nullopt;
    dtype = parse_dtype(dtype_name);
    if (!dtype) return std::nullopt;
    shape.resize(dims);
    for (auto& d : shape) {
      std::uint64_t v = 0;
      if (!c.uint(v) || v > std::uint64_t(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
      d = static_cast<std::int64_t>(v);
    }
    const auto needed = tensor_nbytes(*dtype, shape);
    if (!needed || *needed != nbytes) return std::nullopt;
  }
  if (!c.literal(kTail) || !c.uint(segment) || !c.at_end()) return std::nullopt;
  if (segment != nbytes || header.payload_size != nbytes) return std::nullopt;

  DecodedData out;
  Buffer buffer = allocate_segment(options, SegmentSpec{0, static_cast<std::size_t>(nbytes), dtype,
                                                        dtype ? &shape : nullptr});
  out.segments.push_back(buffer);
  if (dtype) out.root = Tensor::from_buffer(std::move(buffer), *dtype, std::move(shape));
  else out.root = Bytes(std::move(buffer));
  return out;
}

}  // namespace wcomm::codec_detail
