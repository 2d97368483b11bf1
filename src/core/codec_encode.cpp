// Encoding of DATA frames: the canonical msgpack manifest (byte-identical to V0.1) and the
// zero-copy segment list.
#include <limits>

#include "core/codec_internal.h"
#include "core/describe.h"

namespace wcomm {

using codec_detail::fail;
using codec_detail::pack_name;
using codec_detail::pack_str;

namespace {

using Packer = codec_detail::Packer;

[[noreturn]] void unserializable(const std::string& message) { fail(ErrorCode::kSerialization, message); }

// Writes the root node tree in encoding (depth-first) order, numbering segments as it goes.
class NodeEncoder {
 public:
  // `sink` is the stream under `packer` (which does not buffer), for the float64 bytes that
  // msgpack-cxx cannot be made to write.
  NodeEncoder(Packer& packer, codec_detail::VectorSink& sink, const CodecOptions& options)
      : p_(packer), sink_(sink), options_(options), limits_(codec_detail::limits_of(options)) {}

  void node(const Value& v, std::size_t depth) {
    if (++nodes_ > limits_.max_container_nodes)
      unserializable("message has more than max_container_nodes (" + std::to_string(limits_.max_container_nodes) +
                     ") nodes");
    std::visit([&](const auto& x) { encode(x, depth); }, v.variant());
  }

  std::vector<Buffer> take_segments() { return std::move(segments_); }
  std::uint64_t payload_bytes() const { return payload_; }

 private:
  void head(const char* kind, std::uint32_t size) {
    p_.pack_array(size);
    pack_name(p_, kind);
  }

  void encode(None, std::size_t) { head("none", 1); }
  void encode(bool b, std::size_t) {
    head("bool", 2);
    if (b) p_.pack_true(); else p_.pack_false();
  }
  void encode(std::int64_t i, std::size_t) {
    head("int", 2);
    p_.pack_int64(i);  // msgpack-cxx picks the smallest form, as Python's msgpack does
  }
  void encode(std::uint64_t i, std::size_t) {
    head("int", 2);
    p_.pack_uint64(i);
  }
  void encode(double d, std::size_t) {
    head("float", 2);
    codec_detail::pack_float64(sink_, d);
  }
  void encode(const std::string& s, std::size_t) {
    head("str", 2);
    pack_str(p_, s, "string");
  }
  void encode(const Bytes& b, std::size_t) {
    head("bytes", 3);
    p_.pack_uint64(add_segment(b.buffer));
    p_.pack_uint64(b.size());
  }
  void encode(const Pickled& pk, std::size_t) {
    if (!limits_.allow_unsafe_pickle)
      fail(ErrorCode::kUnsupportedPayload,
           "refusing to send a pickle: set allow_unsafe_pickle on both ends, and only with trusted peers");
    head("pickle", 3);
    p_.pack_uint64(add_segment(pk.data));
    p_.pack_uint64(pk.data.size());
  }
  void encode(const Tensor& t, std::size_t) {
    auto needed = tensor_nbytes(t.dtype(), t.shape());
    auto type = [&] { return detail::describe_tensor_type(t.dtype(), t.shape()); };  // (for an error only)
    if (!needed) unserializable("tensor " + type() + " has an invalid shape");
    if (*needed != t.nbytes())
      unserializable("tensor " + type() + " holds " + std::to_string(t.nbytes()) + " bytes but needs " +
                     std::to_string(*needed));
    head("tensor", 5);
    p_.pack_uint64(add_segment(t.buffer()));
    p_.pack_uint64(t.nbytes());
    pack_name(p_, dtype_name(t.dtype()));
    p_.pack_array(static_cast<std::uint32_t>(t.shape().size()));
    for (auto d : t.shape()) p_.pack_int64(d);
  }
  void encode(const List& l, std::size_t depth) { sequence("list", l.items, depth); }
  void encode(const Tuple& t, std::size_t depth) { sequence("tuple", t.items, depth); }
  void encode(const Dict& d, std::size_t depth) {
    enter_container(depth, "dict");
    head("dict", 2);
    p_.pack_array(checked_count(d.items.size()));
    for (const auto& [k, v] : d.items) {
      p_.pack_array(2);
      node(k, depth + 1);
      node(v, depth + 1);
    }
  }
  void encode(const Record& r, std::size_t depth) {
    enter_container(depth, "record");
    check_registered(TypeRegistry::Kind::kRecord, r.type_id, r.version, "record");
    head("dataclass", 4);
    pack_str(p_, r.type_id, "record type_id");
    p_.pack_uint32(r.version);
    p_.pack_array(checked_count(r.fields.size()));
    for (const auto& [name, v] : r.fields) {
      p_.pack_array(2);
      pack_str(p_, name, "record field name");
      node(v, depth + 1);
    }
  }
  void encode(const Custom& c, std::size_t depth) {
    enter_container(depth, "custom value");
    check_registered(TypeRegistry::Kind::kCustom, c.type_id, c.version, "custom codec");
    if (!c.encoded) unserializable("custom value '" + c.type_id + "' has no encoded form");
    head("custom", 4);
    pack_str(p_, c.type_id, "custom type_id");
    p_.pack_uint32(c.version);
    node(*c.encoded, depth + 1);
  }

  void sequence(const char* kind, const std::vector<Value>& items, std::size_t depth) {
    enter_container(depth, kind);
    head(kind, 2);
    p_.pack_array(checked_count(items.size()));
    for (const auto& v : items) node(v, depth + 1);
  }

  void enter_container(std::size_t depth, const char* kind) {
    if (depth + 1 > limits_.max_container_depth)
      unserializable(std::string("a ") + kind + " nests deeper than max_container_depth (" +
                     std::to_string(limits_.max_container_depth) + ")");
  }

  std::uint32_t checked_count(std::size_t n) const {
    // Anything this long is over max_container_nodes long before it is over msgpack's limit;
    // the node count reports it, this only keeps the cast honest.
    if (n > std::numeric_limits<std::uint32_t>::max()) unserializable("container too long for MessagePack");
    return static_cast<std::uint32_t>(n);
  }

  void check_registered(TypeRegistry::Kind kind, const std::string& type_id, std::uint32_t version,
                        const char* what) const {
    if (!options_.registry || !options_.registry->contains(kind, type_id, version))
      fail(ErrorCode::kUnknownCodec, std::string(what) + " type '" + type_id + "' version " +
                                         std::to_string(version) + " is not registered; register it before sending");
  }

  // The segment views the value's own memory and shares its owner: no copy is made.
  std::size_t add_segment(const Buffer& buffer) {
    if (segments_.size() >= limits_.max_segments)
      fail(ErrorCode::kMessageTooLarge, "message needs more than max_segments (" +
                                            std::to_string(limits_.max_segments) +
                                            ") segments (one per bytes / tensor value)");
    segments_.push_back(buffer);
    payload_ += buffer.size();
    return segments_.size() - 1;
  }

  Packer& p_;
  codec_detail::VectorSink& sink_;
  const CodecOptions& options_;
  const CommConfig& limits_;
  std::vector<Buffer> segments_;
  std::uint64_t payload_ = 0;
  std::uint64_t nodes_ = 0;
};

// Packs a piggypayload value: nil, or a map with str keys of msgpack primitives, lists and
// maps (docs/wire-format.md). Tuples are accepted and travel as arrays, as Python's msgpack
// sends them.
void pack_piggy(Packer& p, codec_detail::VectorSink& sink, const Value& v, std::size_t depth) {
  auto container = [&] {
    if (depth > codec_detail::kMaxPiggypayloadDepth)
      unserializable("piggypayload nests deeper than " + std::to_string(codec_detail::kMaxPiggypayloadDepth) +
                     " levels");
  };
  auto array = [&](const std::vector<Value>& items) {
    container();
    p.pack_array(static_cast<std::uint32_t>(items.size()));
    for (const auto& x : items) pack_piggy(p, sink, x, depth + 1);
  };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, None>) p.pack_nil();
        else if constexpr (std::is_same_v<T, bool>) { if (x) p.pack_true(); else p.pack_false(); }
        else if constexpr (std::is_same_v<T, std::int64_t>) p.pack_int64(x);
        else if constexpr (std::is_same_v<T, std::uint64_t>) p.pack_uint64(x);
        else if constexpr (std::is_same_v<T, double>) codec_detail::pack_float64(sink, x);
        else if constexpr (std::is_same_v<T, std::string>) pack_str(p, x, "piggypayload string");
        else if constexpr (std::is_same_v<T, Bytes>) {
          if (x.size() > std::numeric_limits<std::uint32_t>::max())
            fail(ErrorCode::kMessageTooLarge, "piggypayload bytes value is too large");
          p.pack_bin(static_cast<std::uint32_t>(x.size()));
          p.pack_bin_body(reinterpret_cast<const char*>(x.buffer.data()), static_cast<std::uint32_t>(x.size()));
        } else if constexpr (std::is_same_v<T, List> || std::is_same_v<T, Tuple>) array(x.items);
        else if constexpr (std::is_same_v<T, Dict>) {
          container();
          p.pack_map(static_cast<std::uint32_t>(x.items.size()));
          for (const auto& [k, val] : x.items) {
            const auto* key = k.template get_if<std::string>();
            if (!key) unserializable("piggypayload map keys must be strings, got " + summarize(k, 40));
            pack_str(p, *key, "piggypayload key");
            pack_piggy(p, sink, val, depth + 1);
          }
        } else {
          unserializable("piggypayload carries only MessagePack primitives, lists and maps, not " + summarize(v, 60) +
                         "; put it in the message itself");
        }
      },
      v.variant());
}

}  // namespace

// The manifest after the header's room in frame.head, and the segments, by the node tree.
void codec_detail::encode_manifest_generally(const Value& root, const Value& piggypayload, const CodecOptions& options,
                                            EncodedFrame& frame) {
  const CommConfig& limits = codec_detail::limits_of(options);
  codec_detail::VectorSink sink{&frame.head};
  Packer p(sink);

  p.pack_map(options.retry_key ? 4 : 3);
  pack_name(p, "root");
  NodeEncoder nodes(p, sink, options);
  nodes.node(root, 0);

  pack_name(p, "piggypayload");
  if (!piggypayload.is_none() && !piggypayload.is<Dict>())
    unserializable("piggypayload must be None or a Dict with string keys, got " + summarize(piggypayload, 60));
  std::size_t before = frame.head.size();
  pack_piggy(p, sink, piggypayload, 1);
  std::size_t piggy_bytes = frame.head.size() - before;
  if (piggy_bytes > limits.max_metadata_bytes)
    fail(ErrorCode::kMessageTooLarge, "piggypayload packs to " + std::to_string(piggy_bytes) +
                                          " bytes, over max_metadata_bytes (" +
                                          std::to_string(limits.max_metadata_bytes) +
                                          "); put large data in the message itself");

  frame.segments = nodes.take_segments();
  frame.payload_bytes = nodes.payload_bytes();
  pack_name(p, "segments");
  p.pack_array(static_cast<std::uint32_t>(frame.segments.size()));
  for (const auto& s : frame.segments) p.pack_uint64(s.size());
  if (options.retry_key) {
    pack_name(p, "retry_key");
    p.pack_uint64(*options.retry_key);
  }
}

Result<EncodedFrame> encode_data(const Value& root, const Value& piggypayload, std::uint32_t tag,
                                 std::uint64_t message_id, const CodecOptions& options) {
  return codec_detail::run_guarded([&]() -> Result<EncodedFrame> {
    const CommConfig& limits = codec_detail::limits_of(options);
    EncodedFrame frame;
    // The header is written in front of the manifest once its sizes are known, so head is
    // one contiguous buffer without a copy.
    frame.head.reserve(256);  // a small message's whole head, in one allocation
    frame.head.resize(kHeaderSize);
    if (options.retry_key || !codec_detail::encode_small_manifest(root, piggypayload, options, frame))
      codec_detail::encode_manifest_generally(root, piggypayload, options, frame);

    std::size_t manifest_size = frame.head.size() - kHeaderSize;
    if (manifest_size > limits.max_manifest_bytes || manifest_size > std::numeric_limits<std::uint32_t>::max())
      fail(ErrorCode::kMessageTooLarge, "manifest packs to " + std::to_string(manifest_size) +
                                            " bytes, over max_manifest_bytes (" +
                                            std::to_string(limits.max_manifest_bytes) +
                                            "); large data belongs in bytes or tensors");
    if (frame.wire_bytes() > limits.max_message_bytes)
      fail(ErrorCode::kMessageTooLarge, "message of " + std::to_string(frame.wire_bytes()) +
                                            " bytes exceeds max_message_bytes (" +
                                            std::to_string(limits.max_message_bytes) + ")");

    FrameHeader h;
    h.kind = FrameKind::kData;
    h.flags = options.retry_key ? kFlagRetryKey : 0;
    h.tag = tag;
    h.message_id = message_id;
    h.manifest_size = static_cast<std::uint32_t>(manifest_size);
    h.segment_count = static_cast<std::uint32_t>(frame.segments.size());
    h.payload_size = frame.payload_bytes;
    write_header(h, frame.head.data());
    return frame;
  });
}

}  // namespace wcomm
