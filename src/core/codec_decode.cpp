// Decoding of DATA manifests into a Value skeleton whose bytes / tensor / pickle nodes own
// freshly allocated (unfilled) segment storage, with every check of docs/wire-format.md.
#include <algorithm>
#include <limits>

#include "core/codec_internal.h"
#include "core/describe.h"

namespace wcomm {

using codec_detail::fail;
using codec_detail::str_of;

namespace {

using msgpack::type::object_type;

const char* type_name(object_type t) {
  switch (t) {
    case object_type::NIL: return "nil";
    case object_type::BOOLEAN: return "bool";
    case object_type::POSITIVE_INTEGER: return "integer";
    case object_type::NEGATIVE_INTEGER: return "negative integer";
    case object_type::FLOAT32: case object_type::FLOAT64: return "float";
    case object_type::STR: return "str";
    case object_type::BIN: return "bin";
    case object_type::ARRAY: return "array";
    case object_type::MAP: return "map";
    case object_type::EXT: return "ext";
  }
  return "unknown";
}

[[noreturn]] void malformed(const std::string& message) { fail(ErrorCode::kProtocol, message); }

std::string checked_str(const msgpack::object& o, const char* what) {
  if (o.type != object_type::STR) malformed(std::string(what) + " must be a str, got " + type_name(o.type));
  auto s = str_of(o);
  if (!codec_detail::valid_utf8(s)) malformed(std::string(what) + " is not valid UTF-8");
  return std::string(s);
}

std::uint64_t checked_uint(const msgpack::object& o, const char* what) {
  if (o.type != object_type::POSITIVE_INTEGER)
    malformed(std::string(what) + " must be a non-negative integer, got " + type_name(o.type));
  return o.via.u64;
}

// Maximum msgpack nesting a valid manifest can have for a given container depth: a dict or
// record level costs three msgpack levels (pairs array, pair, node), plus the manifest map,
// the root node and a tensor's shape.
std::size_t manifest_msgpack_depth(std::uint64_t container_depth) {
  std::uint64_t d = std::min<std::uint64_t>(container_depth, 1u << 20);
  return static_cast<std::size_t>(std::max<std::uint64_t>(3 * d + 4, codec_detail::kMaxPiggypayloadDepth + 2));
}

class ManifestDecoder {
 public:
  ManifestDecoder(const FrameHeader& header, const CodecOptions& options)
      : header_(header), options_(options), limits_(codec_detail::limits_of(options)) {}

  DecodedData decode(std::span<const std::uint8_t> manifest) {
    std::uint64_t max_elements = std::max<std::uint64_t>(
        {limits_.max_container_nodes, limits_.max_segments, static_cast<std::uint64_t>(kMaxTensorDims) + 1});
    auto handle = codec_detail::unpack_document(
        manifest, manifest_msgpack_depth(limits_.max_container_depth),
        static_cast<std::size_t>(std::min<std::uint64_t>(max_elements, manifest.size())), "DATA manifest");
    const msgpack::object& top = handle.get();
    if (top.type != object_type::MAP) malformed(std::string("DATA manifest must be a map, got ") + type_name(top.type));

    const msgpack::object* root = nullptr;
    const msgpack::object* piggy = nullptr;
    const msgpack::object* segments = nullptr;
    const msgpack::object* retry_key = nullptr;
    for (std::uint32_t i = 0; i < top.via.map.size; ++i) {
      const auto& kv = top.via.map.ptr[i];
      if (kv.key.type != object_type::STR) malformed("DATA manifest keys must be str");
      auto key = str_of(kv.key);
      const msgpack::object** slot = key == "root" ? &root
                                     : key == "piggypayload" ? &piggy
                                     : key == "segments" ? &segments
                                     : key == "retry_key" && (header_.flags & kFlagRetryKey) ? &retry_key
                                                         : nullptr;
      if (!slot) malformed("DATA manifest has an unknown key '" + std::string(key) + "'");
      if (*slot) malformed("DATA manifest repeats the key '" + std::string(key) + "'");
      *slot = &kv.val;
    }
    if (!root) malformed("DATA manifest has no 'root'");
    if (!segments) malformed("DATA manifest has no 'segments'");
    if ((header_.flags & kFlagRetryKey) && (!retry_key || retry_key->type != object_type::POSITIVE_INTEGER))
      malformed("a DATA frame flagged for a retry key has no unsigned 'retry_key' in its manifest");

    read_segment_lengths(*segments);
    DecodedData out;
    out.root = node(*root, 0);
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (!segments_[i].seen) malformed("segment " + std::to_string(i) + " is not referenced by any node");
    out.segments = std::move(buffers_);
    if (piggy) out.piggypayload = piggypayload(*piggy);
    if (retry_key) out.retry_key = retry_key->via.u64;
    return out;
  }

 private:
  void read_segment_lengths(const msgpack::object& o) {
    if (o.type != object_type::ARRAY) malformed(std::string("'segments' must be an array, got ") + type_name(o.type));
    if (o.via.array.size != header_.segment_count)
      malformed("manifest lists " + std::to_string(o.via.array.size) + " segments but the header declares " +
                std::to_string(header_.segment_count));
    std::uint64_t total = 0;
    segments_.reserve(o.via.array.size);
    for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
      const auto& e = o.via.array.ptr[i];
      if (e.type != object_type::POSITIVE_INTEGER)
        malformed("segment length " + std::to_string(i) + " must be a non-negative integer, got " + type_name(e.type));
      // Each length is at most payload_size, which the header limits already bounded.
      if (e.via.u64 > header_.payload_size - total)
        malformed("segment lengths add up to more than the header's payload_size (" +
                  std::to_string(header_.payload_size) + ")");
      total += e.via.u64;
      segments_.push_back({e.via.u64, false});
    }
    if (total != header_.payload_size)
      malformed("segment lengths add up to " + std::to_string(total) + " bytes but the header's payload_size is " +
                std::to_string(header_.payload_size));
    buffers_.resize(segments_.size());
  }

  void count_node() {
    if (++nodes_ > limits_.max_container_nodes)
      fail(ErrorCode::kMessageTooLarge, "message has more than max_container_nodes (" +
                                            std::to_string(limits_.max_container_nodes) + ") nodes");
  }

  void enter_container(std::size_t depth, std::string_view kind) {
    if (depth + 1 > limits_.max_container_depth)
      fail(ErrorCode::kMessageTooLarge, "a " + std::string(kind) + " nests deeper than max_container_depth (" +
                                            std::to_string(limits_.max_container_depth) + ")");
  }

  static void expect_size(const msgpack::object& o, std::uint32_t n, std::string_view kind) {
    if (o.via.array.size != n)
      malformed("'" + std::string(kind) + "' node has " + std::to_string(o.via.array.size) +
                " elements, expected " + std::to_string(n));
  }

  // Claims segment `index` for one node, checks its declared length, and allocates storage.
  // `what()` names the node in error messages (built only for one).
  template <class Describe>
  Buffer claim_segment(const msgpack::object& index_obj, std::uint64_t declared, const Describe& what,
                       std::optional<DType> dtype = std::nullopt, const Shape* shape = nullptr) {
    std::uint64_t index = checked_uint(index_obj, "segment index");
    if (index >= segments_.size())
      malformed(what() + " refers to segment " + std::to_string(index) + " but the frame has " +
                std::to_string(segments_.size()) + " segments");
    if (segments_[index].seen) malformed("segment " + std::to_string(index) + " is referenced by more than one node");
    if (segments_[index].length != declared)
      malformed("segment " + std::to_string(index) + " declares " + std::to_string(segments_[index].length) + " bytes but " +
                what() + " needs " + std::to_string(declared));
    segments_[index].seen = true;
    Buffer buffer = codec_detail::allocate_segment(
        options_, SegmentSpec{static_cast<std::size_t>(index), static_cast<std::size_t>(declared), dtype, shape});
    buffers_[index] = buffer;
    return buffer;
  }

  Value node(const msgpack::object& o, std::size_t depth) {
    count_node();
    if (o.type != object_type::ARRAY || o.via.array.size == 0)
      malformed(std::string("a node must be a non-empty array, got ") + type_name(o.type));
    const msgpack::object* a = o.via.array.ptr;
    if (a[0].type != object_type::STR) malformed("a node must start with its type name");
    auto kind = str_of(a[0]);

    if (kind == "none") {
      expect_size(o, 1, kind);
      return None{};
    }
    if (kind == "bool") {
      expect_size(o, 2, kind);
      if (a[1].type != object_type::BOOLEAN) malformed(std::string("'bool' node holds a ") + type_name(a[1].type));
      return a[1].via.boolean;
    }
    if (kind == "int") {
      expect_size(o, 2, kind);
      if (a[1].type == object_type::POSITIVE_INTEGER) return a[1].via.u64;  // Value normalises
      if (a[1].type == object_type::NEGATIVE_INTEGER) return a[1].via.i64;
      malformed(std::string("'int' node holds a ") + type_name(a[1].type));
    }
    if (kind == "float") {
      expect_size(o, 2, kind);
      if (a[1].type != object_type::FLOAT64 && a[1].type != object_type::FLOAT32)
        malformed(std::string("'float' node holds a ") + type_name(a[1].type));
      return a[1].via.f64;
    }
    if (kind == "str") {
      expect_size(o, 2, kind);
      return checked_str(a[1], "'str' node value");
    }
    if (kind == "bytes") {
      expect_size(o, 3, kind);
      std::uint64_t n = checked_uint(a[2], "'bytes' length");
      return Bytes(claim_segment(a[1], n, [n] { return "bytes(" + std::to_string(n) + ")"; }));
    }
    if (kind == "pickle") {
      expect_size(o, 3, kind);
      if (!limits_.allow_unsafe_pickle)
        fail(ErrorCode::kUnsupportedPayload,
             "peer sent a pickle node, refused because allow_unsafe_pickle is off (enable it only for trusted peers)");
      std::uint64_t n = checked_uint(a[2], "'pickle' length");
      return Pickled{claim_segment(a[1], n, [n] { return "pickle(" + std::to_string(n) + ")"; })};
    }
    if (kind == "tensor") return tensor(o);
    if (kind == "list" || kind == "tuple") {
      expect_size(o, 2, kind);
      enter_container(depth, kind);
      if (a[1].type != object_type::ARRAY) malformed("'" + std::string(kind) + "' node must hold an array");
      std::vector<Value> items;
      items.reserve(a[1].via.array.size);
      for (std::uint32_t i = 0; i < a[1].via.array.size; ++i) items.push_back(node(a[1].via.array.ptr[i], depth + 1));
      if (kind == "list") return List(std::move(items));
      return Tuple(std::move(items));
    }
    if (kind == "dict") {
      expect_size(o, 2, kind);
      enter_container(depth, kind);
      if (a[1].type != object_type::ARRAY) malformed("'dict' node must hold an array of [key, value] pairs");
      std::vector<std::pair<Value, Value>> items;
      items.reserve(a[1].via.array.size);
      for (std::uint32_t i = 0; i < a[1].via.array.size; ++i) {
        const auto& pair = a[1].via.array.ptr[i];
        if (pair.type != object_type::ARRAY || pair.via.array.size != 2)
          malformed("'dict' entries must be [key, value] pairs");
        Value key = node(pair.via.array.ptr[0], depth + 1);
        Value value = node(pair.via.array.ptr[1], depth + 1);
        items.emplace_back(std::move(key), std::move(value));
      }
      return Dict(std::move(items));
    }
    if (kind == "dataclass") {
      expect_size(o, 4, kind);
      enter_container(depth, kind);
      Record r;
      r.type_id = checked_str(a[1], "dataclass type_id");
      r.version = checked_version(a[2], r.type_id);
      check_registered(TypeRegistry::Kind::kRecord, r.type_id, r.version, "record");
      if (a[3].type != object_type::ARRAY) malformed("'dataclass' node must hold an array of [field, value] pairs");
      for (std::uint32_t i = 0; i < a[3].via.array.size; ++i) {
        const auto& pair = a[3].via.array.ptr[i];
        if (pair.type != object_type::ARRAY || pair.via.array.size != 2)
          malformed("'dataclass' fields must be [name, value] pairs");
        std::string name = checked_str(pair.via.array.ptr[0], "dataclass field name");
        r.fields.emplace_back(std::move(name), node(pair.via.array.ptr[1], depth + 1));
      }
      return r;
    }
    if (kind == "custom") {
      expect_size(o, 4, kind);
      enter_container(depth, kind);
      Custom c;
      c.type_id = checked_str(a[1], "custom type_id");
      c.version = checked_version(a[2], c.type_id);
      check_registered(TypeRegistry::Kind::kCustom, c.type_id, c.version, "custom codec");
      c.encoded = std::make_shared<const Value>(node(a[3], depth + 1));
      return c;
    }
    malformed("unknown node type '" + std::string(kind.substr(0, 64)) + "'");
  }

  Value tensor(const msgpack::object& o) {
    expect_size(o, 5, "tensor");
    const msgpack::object* a = o.via.array.ptr;
    std::uint64_t nbytes = checked_uint(a[2], "tensor nbytes");
    std::string dtype_str = checked_str(a[3], "tensor dtype");
    auto dtype = parse_dtype(dtype_str);
    if (!dtype) malformed("unknown tensor dtype '" + dtype_str.substr(0, 64) + "'");
    if (a[4].type != object_type::ARRAY) malformed("tensor shape must be an array");
    if (a[4].via.array.size > static_cast<std::uint32_t>(kMaxTensorDims))
      malformed("tensor has " + std::to_string(a[4].via.array.size) + " dimensions, more than " +
                std::to_string(kMaxTensorDims));
    Shape shape;
    shape.reserve(a[4].via.array.size);
    for (std::uint32_t i = 0; i < a[4].via.array.size; ++i) {
      std::uint64_t d = checked_uint(a[4].via.array.ptr[i], "tensor dimension");
      if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        malformed("tensor dimension " + std::to_string(d) + " is too large");
      shape.push_back(static_cast<std::int64_t>(d));
    }
    auto what = [&] { return "tensor " + detail::describe_tensor_type(*dtype, shape); };
    auto needed = tensor_nbytes(*dtype, shape);
    if (!needed) malformed(what() + " is too large to exist");
    if (*needed != nbytes)
      malformed(what() + " declares nbytes " + std::to_string(nbytes) + " but needs " + std::to_string(*needed));
    Buffer buffer = claim_segment(a[1], nbytes, what, dtype, &shape);
    return Tensor::from_buffer(std::move(buffer), *dtype, std::move(shape));
  }

  static std::uint32_t checked_version(const msgpack::object& o, const std::string& type_id) {
    std::uint64_t v = checked_uint(o, "type version");
    if (v > std::numeric_limits<std::uint32_t>::max())
      malformed("version " + std::to_string(v) + " of '" + type_id + "' does not fit in 32 bits");
    return static_cast<std::uint32_t>(v);
  }

  void check_registered(TypeRegistry::Kind kind, const std::string& type_id, std::uint32_t version,
                        const char* what) const {
    if (!options_.registry || !options_.registry->contains(kind, type_id, version))
      fail(ErrorCode::kUnknownCodec, std::string(what) + " type '" + type_id + "' version " + std::to_string(version) +
                                         " is not registered on this side; register it before receiving it");
  }

  Value piggypayload(const msgpack::object& o) {
    if (o.type == object_type::NIL) return None{};
    if (o.type != object_type::MAP) malformed(std::string("piggypayload must be nil or a map, got ") + type_name(o.type));
    // Measured by repacking (canonically) rather than by its span in the manifest, which the
    // unpacked object does not know; checked before converting anything.
    std::size_t packed = packed_size(o);
    if (packed > limits_.max_metadata_bytes)
      fail(ErrorCode::kMessageTooLarge, "piggypayload of " + std::to_string(packed) +
                                            " packed bytes exceeds max_metadata_bytes (" +
                                            std::to_string(limits_.max_metadata_bytes) + ")");
    return piggy_value(o, 1);
  }

  // The size of o in the encoder's canonical form (floats as float64), which is what the
  // sender measured against its own max_metadata_bytes.
  static std::size_t packed_size(const msgpack::object& o) {
    codec_detail::CountingSink sink;
    msgpack::packer<codec_detail::CountingSink> packer(sink);
    switch (o.type) {
      case object_type::FLOAT32: case object_type::FLOAT64: return 9;
      case object_type::ARRAY: {
        packer.pack_array(o.via.array.size);
        for (std::uint32_t i = 0; i < o.via.array.size; ++i) sink.bytes += packed_size(o.via.array.ptr[i]);
        return sink.bytes;
      }
      case object_type::MAP: {
        packer.pack_map(o.via.map.size);
        for (std::uint32_t i = 0; i < o.via.map.size; ++i)
          sink.bytes += packed_size(o.via.map.ptr[i].key) + packed_size(o.via.map.ptr[i].val);
        return sink.bytes;
      }
      default:
        packer.pack(o);
        return sink.bytes;
    }
  }

  // Piggypayload values do not count towards max_container_nodes: max_metadata_bytes bounds them.
  Value piggy_value(const msgpack::object& o, std::size_t depth) {
    switch (o.type) {
      case object_type::NIL: return None{};
      case object_type::BOOLEAN: return o.via.boolean;
      case object_type::POSITIVE_INTEGER: return o.via.u64;
      case object_type::NEGATIVE_INTEGER: return o.via.i64;
      case object_type::FLOAT32: case object_type::FLOAT64: return o.via.f64;
      case object_type::STR: return checked_str(o, "piggypayload string");
      case object_type::BIN: return Bytes(Buffer::copy_of(o.via.bin.ptr, o.via.bin.size));
      case object_type::ARRAY: {
        check_piggy_depth(depth);
        std::vector<Value> items;
        items.reserve(o.via.array.size);
        for (std::uint32_t i = 0; i < o.via.array.size; ++i) items.push_back(piggy_value(o.via.array.ptr[i], depth + 1));
        return List(std::move(items));
      }
      case object_type::MAP: {
        check_piggy_depth(depth);
        std::vector<std::pair<Value, Value>> items;
        items.reserve(o.via.map.size);
        for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
          const auto& kv = o.via.map.ptr[i];
          if (kv.key.type != object_type::STR) malformed("piggypayload map keys must be str");
          std::string key = checked_str(kv.key, "piggypayload key");
          items.emplace_back(Value(std::move(key)), piggy_value(kv.val, depth + 1));
        }
        return Dict(std::move(items));
      }
      default: malformed(std::string("piggypayload cannot hold a ") + type_name(o.type));
    }
  }

  static void check_piggy_depth(std::size_t depth) {
    if (depth > codec_detail::kMaxPiggypayloadDepth)
      malformed("piggypayload nests deeper than " + std::to_string(codec_detail::kMaxPiggypayloadDepth) + " levels");
  }

  const FrameHeader& header_;
  const CodecOptions& options_;
  const CommConfig& limits_;
  struct SegmentSlot {
    std::uint64_t length;
    bool seen;  // claimed by a node (each segment exactly once)
  };
  std::vector<SegmentSlot> segments_;
  std::vector<Buffer> buffers_;
  std::uint64_t nodes_ = 0;
};

}  // namespace

DecodedData codec_detail::decode_manifest_generally(const FrameHeader& header, std::span<const std::uint8_t> manifest,
                                                   const CodecOptions& options) {
  return ManifestDecoder(header, options).decode(manifest);
}

Buffer codec_detail::allocate_segment(const CodecOptions& options, const SegmentSpec& spec) {
  if (!options.allocate) return Buffer::allocate(spec.nbytes);
  auto r = options.allocate(spec);
  if (!r) throw_error(r.error());
  Buffer buffer = std::move(r.value());
  if (buffer.size() != spec.nbytes || (!buffer.data() && spec.nbytes))
    fail(ErrorCode::kInvalidArgument, "segment allocator returned " + std::to_string(buffer.size()) +
                                          " bytes for segment " + std::to_string(spec.index) + ", which needs " +
                                          std::to_string(spec.nbytes));
  return buffer;
}

Result<DecodedData> decode_data_manifest(const FrameHeader& header, std::span<const std::uint8_t> manifest,
                                         const CodecOptions& options) {
  return codec_detail::run_guarded([&]() -> Result<DecodedData> {
    if (header.kind != FrameKind::kData) malformed("decode_data_manifest called on a non-DATA frame");
    if (manifest.size() != header.manifest_size)
      malformed("manifest span of " + std::to_string(manifest.size()) + " bytes but the header declares " +
                std::to_string(header.manifest_size));
    codec_detail::check_header_limits(header, codec_detail::limits_of(options));
    if (!(header.flags & kFlagRetryKey))
      if (auto small = codec_detail::decode_small_manifest(header, manifest, options)) return std::move(*small);
    return codec_detail::decode_manifest_generally(header, manifest, options);
  });
}

}  // namespace wcomm
