// Tests of the COMM v1 codec: the golden V0.1 frames both ways, the invalid frames, every
// limit on encode and decode, the manifest checks, and a seeded mutation fuzz of decode_frame.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "wcomm/codec.h"

namespace wcomm {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Bytes8 = std::vector<std::uint8_t>;

const fs::path kVectors = WCOMM_TEST_DATA "/wire-vectors";

Bytes8 read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  return Bytes8((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes8 from_hex(const std::string& hex) {
  Bytes8 out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string to_hex(const Bytes8& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += d[b >> 4];
    out += d[b & 15];
  }
  return out;
}

// The typed-JSON form of index.json (see wire-vectors/README.md) as a Value.
Value from_typed_json(const json& j) {
  const std::string t = j.at("t");
  if (t == "none") return None{};
  if (t == "bool") return j.at("v").get<bool>();
  if (t == "int") {
    std::string s = j.at("v");
    if (!s.empty() && s[0] == '-') return static_cast<std::int64_t>(std::strtoll(s.c_str(), nullptr, 10));
    return static_cast<std::uint64_t>(std::strtoull(s.c_str(), nullptr, 10));
  }
  if (t == "float") return std::strtod(j.at("v").get<std::string>().c_str(), nullptr);
  if (t == "str") return j.at("v").get<std::string>();
  if (t == "bytes") {
    Bytes8 b = from_hex(j.at("hex"));
    return Bytes(Buffer::copy_of(b.data(), b.size()));
  }
  if (t == "tensor") {
    auto dtype = parse_dtype(j.at("dtype").get<std::string>());
    EXPECT_TRUE(dtype.has_value());
    Tensor tensor = Tensor::empty(*dtype, j.at("shape").get<Shape>());
    Bytes8 b = from_hex(j.at("hex"));
    EXPECT_EQ(b.size(), tensor.nbytes());
    if (!b.empty()) std::memcpy(tensor.data(), b.data(), b.size());
    return tensor;
  }
  if (t == "list" || t == "tuple") {
    std::vector<Value> items;
    for (const auto& x : j.at("v")) items.push_back(from_typed_json(x));
    if (t == "list") return List(std::move(items));
    return Tuple(std::move(items));
  }
  if (t == "dict") {
    std::vector<std::pair<Value, Value>> items;
    for (const auto& kv : j.at("v")) items.emplace_back(from_typed_json(kv.at(0)), from_typed_json(kv.at(1)));
    return Dict(std::move(items));
  }
  if (t == "dataclass") {
    Record r;
    r.type_id = j.at("type_id");
    r.version = j.at("version");
    for (const auto& f : j.at("v")) r.fields.emplace_back(f.at(0).get<std::string>(), from_typed_json(f.at(1)));
    return r;
  }
  ADD_FAILURE() << "unknown typed-JSON tag " << t;
  return None{};
}

const TypeRegistry& test_registry() {
  static const TypeRegistry registry = [] {
    TypeRegistry r;
    r.add(TypeRegistry::Kind::kRecord, "tests.Record", 1);
    r.add(TypeRegistry::Kind::kCustom, "tests.Point", 2);
    return r;
  }();
  return registry;
}

FrameKind kind_of(const std::string& name) {
  if (name == "HELLO") return FrameKind::kHello;
  if (name == "HELLO_ACK") return FrameKind::kHelloAck;
  if (name == "CLOSE") return FrameKind::kClose;
  EXPECT_EQ(name, "DATA");
  return FrameKind::kData;
}

std::vector<json> load_index() {
  std::ifstream in(kVectors / "index.json");
  if (!in) return {};
  return json::parse(in).get<std::vector<json>>();
}

Bytes8 encode_flat(const Value& root, const Value& piggy = None{}, const CodecOptions& options = {},
                   std::uint32_t tag = 0, std::uint64_t message_id = 1) {
  auto frame = encode_data(root, piggy, tag, message_id, options);
  EXPECT_TRUE(frame.ok()) << frame.error().message;
  return frame.ok() ? flatten(frame.value()) : Bytes8{};
}

// --- golden vectors --------------------------------------------------------------------

class GoldenVector : public ::testing::TestWithParam<json> {};

TEST_P(GoldenVector, DecodesToDescribedValueAndEncodesBackIdentically) {
  const json& v = GetParam();
  Bytes8 wire = read_file(kVectors / v.at("file").get<std::string>());
  ASSERT_EQ(wire.size(), v.at("wire_bytes").get<std::size_t>());
  CodecOptions options{.registry = &test_registry()};

  auto decoded = decode_frame(wire, options);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  const DecodedFrame& f = decoded.value();
  FrameKind kind = kind_of(v.at("kind"));
  EXPECT_EQ(f.header.kind, kind);
  EXPECT_EQ(f.header.tag, v.at("tag").get<std::uint32_t>());
  EXPECT_EQ(f.header.message_id, v.at("message_id").get<std::uint64_t>());

  if (kind == FrameKind::kData) {
    Value expected = from_typed_json(v.at("value"));
    Value expected_piggy = v.at("piggypayload").is_null() ? Value(None{}) : from_typed_json(v.at("piggypayload"));
    EXPECT_FALSE(f.control.has_value());
    EXPECT_EQ(f.root, expected) << summarize(f.root) << " vs " << summarize(expected);
    EXPECT_EQ(f.piggypayload, expected_piggy) << summarize(f.piggypayload);

    auto encoded = encode_data(expected, expected_piggy, f.header.tag, f.header.message_id, options);
    ASSERT_TRUE(encoded.ok()) << encoded.error().message;
    EXPECT_EQ(encoded.value().wire_bytes(), wire.size());
    EXPECT_EQ(to_hex(flatten(encoded.value())), to_hex(wire));
  } else {
    ASSERT_TRUE(f.control.has_value());
    EXPECT_EQ(f.control->node_id, v.at("control").at("node_id").get<std::string>());
    EXPECT_EQ(f.control->connection_id, v.at("control").at("connection_id").get<std::string>());
    EXPECT_TRUE(f.control->features.empty());
    Control c{v.at("control").at("node_id"), v.at("control").at("connection_id"), {}};
    EXPECT_EQ(to_hex(encode_control(kind, c)), to_hex(wire));
  }
}

INSTANTIATE_TEST_SUITE_P(Vectors, GoldenVector, ::testing::ValuesIn(load_index()),
                         [](const ::testing::TestParamInfo<json>& info) {
                           std::string name = info.param.at("file");
                           name = name.substr(0, name.find('.'));
                           for (auto& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(GoldenVectors, IndexIsPresentAndCoversEveryFile) {
  auto index = load_index();
  ASSERT_GE(index.size(), 20u) << "index.json missing or short at " << kVectors;
  std::size_t bins = 0;
  for (const auto& e : fs::directory_iterator(kVectors))
    if (e.path().extension() == ".bin") ++bins;
  EXPECT_EQ(bins, index.size());
}

TEST(InvalidVectors, EveryOneIsRejected) {
  std::size_t count = 0;
  for (const auto& e : fs::directory_iterator(kVectors / "invalid")) {
    if (e.path().extension() != ".bin") continue;
    ++count;
    Bytes8 wire = read_file(e.path());
    std::string name = e.path().stem().string();
    SCOPED_TRACE(name);
    for (bool pickle : {false, true}) {
      CommConfig limits;
      limits.allow_unsafe_pickle = pickle;
      auto r = decode_frame(wire, {.limits = &limits, .registry = &test_registry()});
      ASSERT_FALSE(r.ok());
      if (name == "manifest_over_limit" || name == "message_over_limit")
        EXPECT_EQ(r.error().code, ErrorCode::kMessageTooLarge) << r.error().message;
      else
        EXPECT_EQ(r.error().code, ErrorCode::kProtocol) << r.error().message;
      EXPECT_FALSE(r.error().message.empty());
    }
  }
  EXPECT_GE(count, 12u);
}

TEST(InvalidVectors, HeaderAloneIsEnoughToRejectOversizedFrames) {
  for (const char* name : {"manifest_over_limit.bin", "message_over_limit.bin", "too_many_segments.bin"}) {
    Bytes8 wire = read_file(kVectors / "invalid" / name);
    ASSERT_GE(wire.size(), kHeaderSize);
    auto h = parse_header(wire.data(), CommConfig{});
    EXPECT_FALSE(h.ok()) << name;
  }
}

// --- header ----------------------------------------------------------------------------

TEST(Header, WriteThenParseRoundTrips) {
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.tag = 0xFFFFFF01u;
  h.message_id = 0x0102030405060708ull;
  h.manifest_size = 77;
  h.segment_count = 3;
  h.payload_size = 1000;
  std::uint8_t buf[kHeaderSize];
  write_header(h, buf);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 4), "COMM");
  auto p = parse_header(buf, CommConfig{});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p.value().tag, h.tag);
  EXPECT_EQ(p.value().message_id, h.message_id);
  EXPECT_EQ(p.value().manifest_size, 77u);
  EXPECT_EQ(p.value().segment_count, 3u);
  EXPECT_EQ(p.value().payload_size, 1000u);
  EXPECT_EQ(p.value().frame_bytes(), kHeaderSize + 77 + 1000);
}

TEST(Header, RejectsEachBadField) {
  FrameHeader h;
  std::uint8_t good[kHeaderSize];
  write_header(h, good);
  auto expect_code = [](const std::uint8_t* buf, ErrorCode code, const std::string& needle) {
    auto r = parse_header(buf, CommConfig{});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  std::uint8_t b[kHeaderSize];
  std::memcpy(b, good, kHeaderSize); b[3] = 'X';
  expect_code(b, ErrorCode::kProtocol, "magic");
  std::memcpy(b, good, kHeaderSize); b[5] = 2;
  expect_code(b, ErrorCode::kProtocol, "version");
  std::memcpy(b, good, kHeaderSize); b[6] = 4;
  expect_code(b, ErrorCode::kProtocol, "kind");
  std::memcpy(b, good, kHeaderSize); b[7] = 1;
  expect_code(b, ErrorCode::kProtocol, "flags");
  // payload_size near 2^64 must not overflow the frame size computation.
  std::memcpy(b, good, kHeaderSize);
  std::memset(b + 28, 0xFF, 8);
  expect_code(b, ErrorCode::kMessageTooLarge, "max_message_bytes");
}

TEST(Header, LimitsAreInclusive) {
  CommConfig limits;
  limits.max_manifest_bytes = 100;
  limits.max_segments = 4;
  limits.max_message_bytes = kHeaderSize + 100 + 50;
  FrameHeader h;
  h.manifest_size = 100;
  h.segment_count = 4;
  h.payload_size = 50;
  std::uint8_t b[kHeaderSize];
  write_header(h, b);
  EXPECT_TRUE(parse_header(b, limits).ok());
  h.payload_size = 51;
  write_header(h, b);
  EXPECT_EQ(parse_header(b, limits).error().code, ErrorCode::kMessageTooLarge);
  h.payload_size = 50;
  h.segment_count = 5;
  write_header(h, b);
  EXPECT_EQ(parse_header(b, limits).error().code, ErrorCode::kProtocol);
  h.segment_count = 4;
  h.manifest_size = 101;
  write_header(h, b);
  EXPECT_EQ(parse_header(b, limits).error().code, ErrorCode::kMessageTooLarge);
}

// --- hand-built frames for decoder checks ------------------------------------------------

using MsgPacker = msgpack::packer<msgpack::sbuffer>;

// A frame whose manifest is written by `manifest`, with the given segment bytes appended and
// the header's counts set from `segment_count` / `payload_size` (defaults: what follows).
template <class F>
Bytes8 craft(F&& manifest, const std::vector<Bytes8>& segments = {}, std::optional<std::uint32_t> segment_count = {},
             std::optional<std::uint64_t> payload_size = {}, FrameKind kind = FrameKind::kData) {
  msgpack::sbuffer buf;
  MsgPacker p(buf);
  manifest(p);
  FrameHeader h;
  h.kind = kind;
  h.manifest_size = static_cast<std::uint32_t>(buf.size());
  std::uint64_t total = 0;
  for (const auto& s : segments) total += s.size();
  h.segment_count = segment_count.value_or(static_cast<std::uint32_t>(segments.size()));
  h.payload_size = payload_size.value_or(total);
  Bytes8 out(kHeaderSize);
  write_header(h, out.data());
  out.insert(out.end(), buf.data(), buf.data() + buf.size());
  for (const auto& s : segments) out.insert(out.end(), s.begin(), s.end());
  return out;
}

void pack_s(MsgPacker& p, const std::string& s) { p.pack(s); }

// {"root": <root>, "piggypayload": nil, "segments": lengths}
template <class R>
auto manifest_with(R&& root, std::vector<std::int64_t> lengths) {
  return [root, lengths](MsgPacker& p) {
    p.pack_map(3);
    pack_s(p, "root");
    root(p);
    pack_s(p, "piggypayload");
    p.pack_nil();
    pack_s(p, "segments");
    p.pack_array(static_cast<std::uint32_t>(lengths.size()));
    for (auto l : lengths) p.pack(l);
  };
}

auto tensor_node(std::int64_t seg, std::int64_t nbytes, const std::string& dtype, std::vector<std::int64_t> shape) {
  return [=](MsgPacker& p) {
    p.pack_array(5);
    pack_s(p, "tensor");
    p.pack(seg);
    p.pack(nbytes);
    pack_s(p, dtype);
    p.pack_array(static_cast<std::uint32_t>(shape.size()));
    for (auto d : shape) p.pack(d);
  };
}

auto bytes_node(std::int64_t seg, std::int64_t n, const char* kind = "bytes") {
  return [=](MsgPacker& p) {
    p.pack_array(3);
    pack_s(p, kind);
    p.pack(seg);
    p.pack(n);
  };
}

Error decode_error(const Bytes8& frame, const CodecOptions& options = {}) {
  auto r = decode_frame(frame, options);
  EXPECT_FALSE(r.ok());
  return r.ok() ? Error{ErrorCode::kClosed, "unexpectedly decoded"} : r.error();
}

void expect_error(const Bytes8& frame, ErrorCode code, const std::string& needle, const CodecOptions& options = {}) {
  Error e = decode_error(frame, options);
  EXPECT_EQ(e.code, code) << e.message;
  EXPECT_NE(e.message.find(needle), std::string::npos) << "message: " << e.message;
}

TEST(DecodeChecks, CraftedFrameMatchingTheEncoderDecodes) {
  Bytes8 data(16, 7);
  auto frame = craft(manifest_with(tensor_node(0, 16, "float32", {2, 2}), {16}), {data});
  auto r = decode_frame(frame);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& t = r.value().root.as<Tensor>();
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.data()[15], 7);
}

TEST(DecodeChecks, SegmentLengthMustMatchTensor) {
  auto frame = craft(manifest_with(tensor_node(0, 16, "float32", {2, 2}), {12}), {Bytes8(12)});
  expect_error(frame, ErrorCode::kProtocol, "segment 0 declares 12 bytes but tensor float32[2,2] needs 16");
}

TEST(DecodeChecks, TensorNbytesMustMatchShapeAndDtype) {
  auto frame = craft(manifest_with(tensor_node(0, 12, "float32", {2, 2}), {12}), {Bytes8(12)});
  expect_error(frame, ErrorCode::kProtocol, "float32[2,2] declares nbytes 12 but needs 16");
}

TEST(DecodeChecks, UnknownDtype) {
  auto frame = craft(manifest_with(tensor_node(0, 4, "complex64", {1}), {4}), {Bytes8(4)});
  expect_error(frame, ErrorCode::kProtocol, "dtype 'complex64'");
}

TEST(DecodeChecks, NegativeDimension) {
  auto frame = craft(manifest_with(tensor_node(0, 0, "uint8", {-1}), {0}), {Bytes8()});
  expect_error(frame, ErrorCode::kProtocol, "dimension");
}

TEST(DecodeChecks, SixtyFourDimsAcceptedSixtyFiveRejected) {
  auto ok = craft(manifest_with(tensor_node(0, 1, "uint8", std::vector<std::int64_t>(64, 1)), {1}), {Bytes8(1)});
  auto r = decode_frame(ok);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root.as<Tensor>().shape().size(), 64u);
  auto bad = craft(manifest_with(tensor_node(0, 1, "uint8", std::vector<std::int64_t>(65, 1)), {1}), {Bytes8(1)});
  expect_error(bad, ErrorCode::kProtocol, "65 dimensions");
}

TEST(DecodeChecks, HugeShapeDoesNotOverflow) {
  auto frame = craft(manifest_with(tensor_node(0, 0, "float64", {1ll << 40, 1ll << 40}), {0}), {Bytes8()});
  expect_error(frame, ErrorCode::kProtocol, "too large");
}

TEST(DecodeChecks, SegmentIndexOutOfRange) {
  auto frame = craft(manifest_with(bytes_node(1, 3), {3}), {Bytes8(3)});
  expect_error(frame, ErrorCode::kProtocol, "refers to segment 1 but the frame has 1 segments");
}

TEST(DecodeChecks, SegmentReferencedTwice) {
  auto root = [](MsgPacker& p) {
    p.pack_array(2);
    pack_s(p, "list");
    p.pack_array(2);
    bytes_node(0, 3)(p);
    bytes_node(0, 3)(p);
  };
  auto frame = craft(manifest_with(root, {3, 3}), {Bytes8(3), Bytes8(3)});
  expect_error(frame, ErrorCode::kProtocol, "segment 0 is referenced by more than one node");
}

TEST(DecodeChecks, SegmentNotReferenced) {
  auto frame = craft(manifest_with(bytes_node(0, 3), {3, 2}), {Bytes8(3), Bytes8(2)});
  expect_error(frame, ErrorCode::kProtocol, "segment 1 is not referenced");
}

TEST(DecodeChecks, BytesLengthMustMatchSegment) {
  auto frame = craft(manifest_with(bytes_node(0, 4), {3}), {Bytes8(3)});
  expect_error(frame, ErrorCode::kProtocol, "segment 0 declares 3 bytes but bytes(4) needs 4");
}

TEST(DecodeChecks, SegmentListMustAgreeWithHeader) {
  auto count = craft(manifest_with(bytes_node(0, 3), {3}), {Bytes8(3)}, 2u);
  expect_error(count, ErrorCode::kProtocol, "lists 1 segments but the header declares 2");
  // The header's payload_size is 4 but the listed lengths add up to 3 (frame padded to match).
  auto sum = craft(manifest_with(bytes_node(0, 3), {3}), {Bytes8(4)}, 1u, 4u);
  expect_error(sum, ErrorCode::kProtocol, "add up to 3 bytes");
  auto negative = craft(manifest_with(bytes_node(0, 3), {-3}), {}, 1u, 0u);
  expect_error(negative, ErrorCode::kProtocol, "non-negative");
}

TEST(DecodeChecks, PickleOnlyWhenAllowed) {
  auto frame = craft(manifest_with(bytes_node(0, 2, "pickle"), {2}), {Bytes8{0x80, 0x04}});
  expect_error(frame, ErrorCode::kUnsupportedPayload, "allow_unsafe_pickle");
  CommConfig limits;
  limits.allow_unsafe_pickle = true;
  auto r = decode_frame(frame, {.limits = &limits});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root.as<Pickled>().data.size(), 2u);
}

TEST(DecodeChecks, MalformedNodes) {
  auto node = [](auto f) { return craft(manifest_with(f, {})); };
  expect_error(node([](MsgPacker& p) { p.pack(5); }), ErrorCode::kProtocol, "non-empty array");
  expect_error(node([](MsgPacker& p) { p.pack_array(1); pack_s(p, "frobnicate"); }), ErrorCode::kProtocol,
               "unknown node type 'frobnicate'");
  expect_error(node([](MsgPacker& p) { p.pack_array(2); pack_s(p, "none"); p.pack_nil(); }), ErrorCode::kProtocol,
               "expected 1");
  expect_error(node([](MsgPacker& p) { p.pack_array(2); pack_s(p, "int"); pack_s(p, "7"); }), ErrorCode::kProtocol,
               "'int' node");
  expect_error(node([](MsgPacker& p) { p.pack_array(2); pack_s(p, "str"); pack_s(p, "\xff\xfe"); }),
               ErrorCode::kProtocol, "UTF-8");
  expect_error(node([](MsgPacker& p) { p.pack_array(2); pack_s(p, "dict"); p.pack_array(1); p.pack_array(1); p.pack_nil(); }),
               ErrorCode::kProtocol, "[key, value]");
}

TEST(DecodeChecks, ManifestShape) {
  // Unknown key, missing root, trailing bytes, ext, not a map, not msgpack at all.
  auto unknown = craft([](MsgPacker& p) {
    p.pack_map(3);
    pack_s(p, "root");
    p.pack_array(1);
    pack_s(p, "none");
    pack_s(p, "segments");
    p.pack_array(0);
    pack_s(p, "extra");
    p.pack_nil();
  });
  expect_error(unknown, ErrorCode::kProtocol, "unknown key 'extra'");
  auto missing = craft([](MsgPacker& p) {
    p.pack_map(1);
    pack_s(p, "segments");
    p.pack_array(0);
  });
  expect_error(missing, ErrorCode::kProtocol, "no 'root'");
  auto trailing = craft([](MsgPacker& p) {
    manifest_with([](MsgPacker& q) { q.pack_array(1); pack_s(q, "none"); }, {})(p);
    p.pack_nil();
  });
  expect_error(trailing, ErrorCode::kProtocol, "trailing");
  auto ext = craft(manifest_with([](MsgPacker& p) { p.pack_ext(1, 5); p.pack_ext_body("x", 1); }, {}));
  expect_error(ext, ErrorCode::kProtocol, "ext");
  auto not_map = craft([](MsgPacker& p) { p.pack_array(0); });
  expect_error(not_map, ErrorCode::kProtocol, "must be a map");
}

TEST(DecodeChecks, HostileLengthsDoNotAllocate) {
  // An array header that claims 2^32-1 elements in a 5-byte manifest: rejected without
  // reserving room for the elements (ASan would flag a huge allocation).
  Bytes8 manifest{0xdd, 0xff, 0xff, 0xff, 0xff};
  FrameHeader h;
  h.manifest_size = 5;
  Bytes8 frame(kHeaderSize);
  write_header(h, frame.data());
  frame.insert(frame.end(), manifest.begin(), manifest.end());
  Error e = decode_error(frame);
  EXPECT_TRUE(e.code == ErrorCode::kProtocol || e.code == ErrorCode::kMessageTooLarge) << e.message;
  // Nested arrays each claiming a million elements.
  Bytes8 nested(kHeaderSize);
  for (int i = 0; i < 60; ++i) {
    for (std::uint8_t b : {0xdd, 0x00, 0x0f, 0x42, 0x40}) nested.push_back(b);
  }
  h.manifest_size = static_cast<std::uint32_t>(nested.size() - kHeaderSize);
  write_header(h, nested.data());
  e = decode_error(nested);
  EXPECT_TRUE(e.code == ErrorCode::kProtocol || e.code == ErrorCode::kMessageTooLarge) << e.message;
}

TEST(DecodeChecks, TruncatedAndOverlongFrames) {
  Bytes8 wire = encode_flat(Dict{{"a", Bytes("xyz")}});
  for (std::size_t n : {std::size_t{0}, std::size_t{10}, kHeaderSize, wire.size() - 1}) {
    Bytes8 cut(wire.begin(), wire.begin() + static_cast<std::ptrdiff_t>(n));
    expect_error(cut, ErrorCode::kProtocol, "truncated");
  }
  Bytes8 longer = wire;
  longer.push_back(0);
  expect_error(longer, ErrorCode::kProtocol, "overlong");
}

TEST(DecodeChecks, ControlFrameInvariants) {
  Control c{"node-a", "0123456789abcdef0123456789abcdef", {}};
  Bytes8 hello = encode_control(FrameKind::kHello, c);
  FrameHeader h = parse_header(hello.data(), CommConfig{}).value();
  std::span<const std::uint8_t> manifest(hello.data() + kHeaderSize, h.manifest_size);
  EXPECT_TRUE(decode_control(h, manifest).ok());
  FrameHeader with_segments = h;
  with_segments.segment_count = 1;
  EXPECT_EQ(decode_control(with_segments, manifest).error().code, ErrorCode::kProtocol);
  FrameHeader data = h;
  data.kind = FrameKind::kData;
  EXPECT_EQ(decode_control(data, manifest).error().code, ErrorCode::kProtocol);
  EXPECT_EQ(decode_data_manifest(h, manifest).error().code, ErrorCode::kProtocol);
  // A handshake needs a well-formed connection_id.
  auto bad_id = craft(
      [](MsgPacker& p) {
        p.pack_map(2);
        pack_s(p, "control");
        p.pack_map(2);
        pack_s(p, "node_id");
        pack_s(p, "node-a");
        pack_s(p, "connection_id");
        pack_s(p, "NOT-HEX");
        pack_s(p, "segments");
        p.pack_array(0);
      },
      {}, {}, {}, FrameKind::kHelloAck);
  expect_error(bad_id, ErrorCode::kProtocol, "connection_id");
}

// --- control frames --------------------------------------------------------------------

TEST(Control, FeaturesTravelOnlyWhenNonEmpty) {
  Control c{"node-b", "ffffffffffffffffffffffffffffffff", {"auth", "chunked"}};
  Bytes8 wire = encode_control(FrameKind::kHello, c);
  auto r = decode_frame(wire);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().control->features, c.features);
  EXPECT_EQ(r.value().control->node_id, "node-b");
  Bytes8 plain = encode_control(FrameKind::kHello, Control{"node-b", c.connection_id, {}});
  EXPECT_LT(plain.size(), wire.size());
  EXPECT_EQ(std::string(plain.begin(), plain.end()).find("features"), std::string::npos);
}

TEST(Control, CloseMayBeEmpty) {
  Bytes8 wire = encode_control(FrameKind::kClose, Control{});
  auto r = decode_frame(wire);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().header.kind, FrameKind::kClose);
  EXPECT_TRUE(r.value().control->node_id.empty());
}

TEST(Control, EncodeRefusesBadArguments) {
  EXPECT_THROW(encode_control(FrameKind::kData, Control{}), InvalidArgumentError);
  EXPECT_THROW(encode_control(FrameKind::kHello, Control{"a", "0123", {}}), InvalidArgumentError);
  EXPECT_THROW(encode_control(FrameKind::kHello, Control{"", "0123456789abcdef0123456789abcdef", {}}),
               InvalidArgumentError);
}

// --- encoding ----------------------------------------------------------------------------

TEST(Encode, TensorSegmentIsTheTensorsOwnMemory) {
  Tensor t = Tensor::zeros(DType::kFloat32, {3, 224, 224});
  auto frame = encode_data(Dict{{"x", t}, {"b", Bytes("abc")}}, None{}, 1, 1);
  ASSERT_TRUE(frame.ok()) << frame.error().message;
  ASSERT_EQ(frame.value().segments.size(), 2u);
  EXPECT_EQ(frame.value().segments[0].data(), t.data());
  EXPECT_EQ(frame.value().segments[0].owner(), t.buffer().owner());
  EXPECT_EQ(frame.value().payload_bytes, t.nbytes() + 3);
}

TEST(Encode, BorrowedTensorIsNotCopied) {
  std::vector<float> storage(12, 1.5f);
  Tensor t = Tensor::borrow(storage.data(), DType::kFloat32, {3, 4});
  auto frame = encode_data(t, None{}, 1, 1);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame.value().segments[0].data(), reinterpret_cast<std::uint8_t*>(storage.data()));
  EXPECT_TRUE(frame.value().segments[0].borrowed());
}

TEST(Encode, SegmentsNumberedDepthFirstKeyBeforeValue) {
  Dict d{{Bytes("k0"), Bytes("v1")}, {"x", List{Bytes("l2"), Tensor::zeros(DType::kUInt8, {3})}}};
  auto frame = encode_data(d, None{}, 0, 1);
  ASSERT_TRUE(frame.ok());
  ASSERT_EQ(frame.value().segments.size(), 4u);
  EXPECT_EQ(frame.value().segments[0].view(), "k0");
  EXPECT_EQ(frame.value().segments[1].view(), "v1");
  EXPECT_EQ(frame.value().segments[2].view(), "l2");
  auto r = decode_frame(flatten(frame.value()));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root, Value(d));
}

TEST(Encode, IntegerExtremesUseTheSmallestForm) {
  struct Case {
    Value v;
    const char* hex;
  };
  const Case cases[] = {
      {0, "00"},
      {127, "7f"},
      {128, "cc80"},
      {255, "ccff"},
      {256, "cd0100"},
      {65535, "cdffff"},
      {65536, "ce00010000"},
      {std::int64_t{4294967296}, "cf0000000100000000"},
      {std::numeric_limits<std::int64_t>::max(), "cf7fffffffffffffff"},
      {std::uint64_t{1} << 63, "cf8000000000000000"},
      {std::numeric_limits<std::uint64_t>::max(), "cfffffffffffffffff"},
      {-1, "ff"},
      {-32, "e0"},
      {-33, "d0df"},
      {-128, "d080"},
      {-129, "d1ff7f"},
      {-32769, "d2ffff7fff"},
      {std::int64_t{-2147483649}, "d3ffffffff7fffffff"},
      {std::numeric_limits<std::int64_t>::min(), "d38000000000000000"},
  };
  for (const auto& c : cases) {
    Bytes8 wire = encode_flat(c.v);
    // Manifest: 83 a4"root" 92 a3"int" <int> ...
    std::string hex = to_hex(wire).substr(2 * (kHeaderSize + 1 + 5 + 1 + 4));
    EXPECT_EQ(hex.substr(0, std::string(c.hex).size()), c.hex) << summarize(c.v);
    auto r = decode_frame(wire);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().root, c.v) << summarize(c.v);
  }
  EXPECT_TRUE(Value(std::uint64_t{5}).is<std::int64_t>());
  EXPECT_TRUE(Value(std::numeric_limits<std::uint64_t>::max()).is<std::uint64_t>());
}

TEST(Encode, FloatsAreFloat64AndRoundTripExactly) {
  for (double d : {0.0, -0.0, 1.0 / 3.0, 1e308, -5e-324, std::numeric_limits<double>::infinity()}) {
    auto r = decode_frame(encode_flat(d));
    ASSERT_TRUE(r.ok());
    double back = r.value().root.as<double>();
    EXPECT_EQ(std::memcmp(&back, &d, sizeof d), 0) << d;
  }
  auto nan = decode_frame(encode_flat(std::numeric_limits<double>::quiet_NaN()));
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan.value().root.as<double>()));
  Bytes8 wire = encode_flat(1.5f);
  EXPECT_NE(to_hex(wire).find("cb3ff8000000000000"), std::string::npos);
}

TEST(Encode, StringsMustBeUtf8) {
  auto r = encode_data(Value(std::string("\xc3\x28")), None{}, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kSerialization);
  EXPECT_TRUE(encode_data(Value(std::string("h\xc3\xa9llo \xe2\x9c\x93")), None{}, 0, 1).ok());
}

TEST(Encode, InconsistentTensorIsRefused) {
  auto r = encode_data(Tensor{}, None{}, 0, 1);  // a default Tensor: shape [] but no storage
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kSerialization);
}

TEST(Encode, SixtyFourDimTensorRoundTrips) {
  Tensor t = Tensor::zeros(DType::kInt16, Shape(64, 1));
  t.data_as<std::int16_t>()[0] = -7;
  auto r = decode_frame(encode_flat(t));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root, Value(t));
  EXPECT_THROW(Tensor::zeros(DType::kInt16, Shape(65, 1)), InvalidArgumentError);
}

// --- registered types and pickle -----------------------------------------------------------

TEST(Registry, RecordsNeedRegistrationOnBothSides) {
  Record rec{"tests.Record", 1, {{"sequence", 9}, {"label", "message"}}};
  auto unregistered = encode_data(rec, None{}, 0, 1);
  ASSERT_FALSE(unregistered.ok());
  EXPECT_EQ(unregistered.error().code, ErrorCode::kUnknownCodec);
  EXPECT_NE(unregistered.error().message.find("tests.Record"), std::string::npos);

  Record other_version = rec;
  other_version.version = 2;
  auto wrong = encode_data(other_version, None{}, 0, 1, {.registry = &test_registry()});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kUnknownCodec);

  Bytes8 wire = encode_flat(rec, None{}, {.registry = &test_registry()});
  auto r = decode_frame(wire);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnknownCodec);
  auto ok = decode_frame(wire, {.registry = &test_registry()});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok.value().root, Value(rec));

  // A record type_id registered as a custom codec is not a record.
  TypeRegistry custom_only;
  custom_only.add(TypeRegistry::Kind::kCustom, "tests.Record", 1);
  EXPECT_EQ(decode_frame(wire, {.registry = &custom_only}).error().code, ErrorCode::kUnknownCodec);
}

TEST(Registry, CustomValuesRoundTrip) {
  Custom c{"tests.Point", 2, std::make_shared<const Value>(Tuple{1.0, 2.0, Tensor::zeros(DType::kBFloat16, {2})})};
  EXPECT_EQ(encode_data(c, None{}, 0, 1).error().code, ErrorCode::kUnknownCodec);
  Bytes8 wire = encode_flat(c, None{}, {.registry = &test_registry()});
  EXPECT_EQ(decode_frame(wire).error().code, ErrorCode::kUnknownCodec);
  auto r = decode_frame(wire, {.registry = &test_registry()});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root, Value(c));
  Custom empty{"tests.Point", 2, nullptr};
  EXPECT_EQ(encode_data(empty, None{}, 0, 1, {.registry = &test_registry()}).error().code,
            ErrorCode::kSerialization);
}

TEST(Pickle, GatedOnEncodeAndDecode) {
  Pickled pk{Buffer::copy_of("\x80\x04N.", 4)};
  auto refused = encode_data(List{pk}, None{}, 0, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnsupportedPayload);
  CommConfig unsafe;
  unsafe.allow_unsafe_pickle = true;
  Bytes8 wire = encode_flat(List{pk}, None{}, {.limits = &unsafe});
  EXPECT_EQ(decode_frame(wire).error().code, ErrorCode::kUnsupportedPayload);
  auto r = decode_frame(wire, {.limits = &unsafe});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root, Value(List{pk}));
}

// --- limits, on encode and on decode ------------------------------------------------------

Value nested_lists(int depth) {
  Value v = 1;
  for (int i = 0; i < depth; ++i) v = List{v};
  return v;
}

TEST(Limits, ContainerDepth) {
  CommConfig big;
  big.max_container_depth = 1000;
  // Exactly max_container_depth levels are fine; one more is refused on both sides.
  EXPECT_TRUE(encode_data(nested_lists(64), None{}, 0, 1).ok());
  auto too_deep = encode_data(nested_lists(65), None{}, 0, 1);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error().code, ErrorCode::kSerialization);
  EXPECT_NE(too_deep.error().message.find("max_container_depth"), std::string::npos);

  EXPECT_TRUE(decode_frame(encode_flat(nested_lists(64))).ok());
  Bytes8 wire = encode_flat(nested_lists(65), None{}, {.limits = &big});
  EXPECT_EQ(decode_frame(wire).error().code, ErrorCode::kMessageTooLarge);
  EXPECT_TRUE(decode_frame(wire, {.limits = &big}).ok());
  // Far deeper than the limit: stopped by the structural pass before any recursion.
  Bytes8 very_deep = encode_flat(nested_lists(900), None{}, {.limits = &big});
  EXPECT_EQ(decode_frame(very_deep).error().code, ErrorCode::kMessageTooLarge);

  Value deep_dict = 1;
  for (int i = 0; i < 65; ++i) deep_dict = Dict{{"k", deep_dict}};
  EXPECT_EQ(encode_data(deep_dict, None{}, 0, 1).error().code, ErrorCode::kSerialization);
  EXPECT_EQ(decode_frame(encode_flat(deep_dict, None{}, {.limits = &big})).error().code, ErrorCode::kMessageTooLarge);
}

TEST(Limits, ContainerNodes) {
  CommConfig small;
  small.max_container_nodes = 10;
  List ten;
  for (int i = 0; i < 9; ++i) ten.items.push_back(i);  // 9 ints + the list = 10 nodes
  EXPECT_TRUE(encode_data(ten, None{}, 0, 1, {.limits = &small}).ok());
  List eleven = ten;
  eleven.items.push_back(9);
  auto r = encode_data(eleven, None{}, 0, 1, {.limits = &small});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kSerialization);
  EXPECT_TRUE(decode_frame(encode_flat(ten), {.limits = &small}).ok());
  EXPECT_EQ(decode_frame(encode_flat(eleven), {.limits = &small}).error().code, ErrorCode::kMessageTooLarge);
}

TEST(Limits, Segments) {
  CommConfig small;
  small.max_segments = 2;
  List two{Bytes("a"), Bytes("b")};
  List three{Bytes("a"), Bytes("b"), Tensor::zeros(DType::kUInt8, {1})};
  EXPECT_TRUE(encode_data(two, None{}, 0, 1, {.limits = &small}).ok());
  auto r = encode_data(three, None{}, 0, 1, {.limits = &small});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMessageTooLarge);
  EXPECT_TRUE(decode_frame(encode_flat(two), {.limits = &small}).ok());
  EXPECT_EQ(decode_frame(encode_flat(three), {.limits = &small}).error().code, ErrorCode::kProtocol);
}

TEST(Limits, MessageBytes) {
  Bytes8 payload(1000, 1);
  Value v = Bytes(Buffer::copy_of(payload.data(), payload.size()));
  Bytes8 wire = encode_flat(v);
  CommConfig exact;
  exact.max_message_bytes = wire.size();
  EXPECT_TRUE(encode_data(v, None{}, 0, 1, {.limits = &exact}).ok());
  EXPECT_TRUE(decode_frame(wire, {.limits = &exact}).ok());
  CommConfig small;
  small.max_message_bytes = wire.size() - 1;
  auto r = encode_data(v, None{}, 0, 1, {.limits = &small});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMessageTooLarge);
  EXPECT_NE(r.error().message.find("max_message_bytes"), std::string::npos);
  EXPECT_EQ(decode_frame(wire, {.limits = &small}).error().code, ErrorCode::kMessageTooLarge);
}

TEST(Limits, ManifestBytes) {
  Value v = std::string(300, 'x');
  Bytes8 wire = encode_flat(v);
  FrameHeader h = parse_header(wire.data(), CommConfig{}).value();
  CommConfig exact;
  exact.max_manifest_bytes = h.manifest_size;
  EXPECT_TRUE(encode_data(v, None{}, 0, 1, {.limits = &exact}).ok());
  EXPECT_TRUE(decode_frame(wire, {.limits = &exact}).ok());
  CommConfig small;
  small.max_manifest_bytes = h.manifest_size - 1;
  auto r = encode_data(v, None{}, 0, 1, {.limits = &small});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMessageTooLarge);
  EXPECT_EQ(decode_frame(wire, {.limits = &small}).error().code, ErrorCode::kMessageTooLarge);
}

TEST(Limits, MetadataBytes) {
  Dict piggy{{"trace", std::string(100, 't')}};
  // fixmap(1) + fixstr "trace" (6) + str8 header (2) + 100 = 109 packed bytes.
  CommConfig exact;
  exact.max_metadata_bytes = 109;
  EXPECT_TRUE(encode_data(None{}, piggy, 0, 1, {.limits = &exact}).ok());
  CommConfig small;
  small.max_metadata_bytes = 108;
  auto r = encode_data(None{}, piggy, 0, 1, {.limits = &small});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kMessageTooLarge);
  EXPECT_NE(r.error().message.find("max_metadata_bytes"), std::string::npos);
  Bytes8 wire = encode_flat(None{}, piggy);
  EXPECT_TRUE(decode_frame(wire, {.limits = &exact}).ok());
  EXPECT_EQ(decode_frame(wire, {.limits = &small}).error().code, ErrorCode::kMessageTooLarge);
}

// --- piggypayload rules ------------------------------------------------------------------

TEST(Piggypayload, AcceptsPrimitivesListsAndMaps) {
  Dict piggy{{"none", None{}},
             {"b", true},
             {"i", -5},
             {"u", std::numeric_limits<std::uint64_t>::max()},
             {"f", 0.25},
             {"s", "text"},
             {"raw", Bytes("\x00\x01")},
             {"list", List{1, "two", List{}}},
             {"map", Dict{{"nested", Dict{{"deeper", 1}}}}}};
  auto r = decode_frame(encode_flat("x", piggy));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().piggypayload, Value(piggy));
  // Tuples travel as arrays, as Python's msgpack sends them, and come back as lists.
  auto t = decode_frame(encode_flat("x", Dict{{"t", Tuple{1, 2}}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().piggypayload, Value(Dict{{"t", List{1, 2}}}));
  // An empty map stays a map.
  auto e = decode_frame(encode_flat("x", Dict{}));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value().piggypayload, Value(Dict{}));
}

TEST(Piggypayload, RefusesOtherShapes) {
  for (const Value& bad : {Value(5), Value("str"), Value(List{1}),
                           Value(Dict{{1, "int key"}}),
                           Value(Dict{{"t", Tensor::zeros(DType::kUInt8, {1})}}),
                           Value(Dict{{"r", Record{"tests.Record", 1, {}}}})}) {
    auto r = encode_data(None{}, bad, 0, 1, {.registry = &test_registry()});
    ASSERT_FALSE(r.ok()) << summarize(bad);
    EXPECT_EQ(r.error().code, ErrorCode::kSerialization) << summarize(bad);
  }
}

Value nested_piggy(int levels) {
  Value v = 1;
  for (int i = 1; i < levels; ++i) v = List{v};
  return Dict{{"k", v}};  // the map itself is level 1
}

TEST(Piggypayload, DepthSixteenAcceptedSeventeenRefused) {
  EXPECT_TRUE(decode_frame(encode_flat(None{}, nested_piggy(16))).ok());
  EXPECT_EQ(encode_data(None{}, nested_piggy(17), 0, 1).error().code, ErrorCode::kSerialization);
  // A peer that sends one anyway is refused.
  auto deep = craft([](MsgPacker& p) {
    p.pack_map(3);
    pack_s(p, "root");
    p.pack_array(1);
    pack_s(p, "none");
    pack_s(p, "piggypayload");
    p.pack_map(1);
    pack_s(p, "k");
    for (int i = 0; i < 16; ++i) p.pack_array(1);
    p.pack(1);
    pack_s(p, "segments");
    p.pack_array(0);
  });
  expect_error(deep, ErrorCode::kProtocol, "deeper than 16");
}

TEST(Piggypayload, DecodeRefusesNonMapsAndNonStringKeys) {
  auto with_piggy = [](auto piggy) {
    return craft([piggy](MsgPacker& p) {
      p.pack_map(3);
      pack_s(p, "root");
      p.pack_array(1);
      pack_s(p, "none");
      pack_s(p, "piggypayload");
      piggy(p);
      pack_s(p, "segments");
      p.pack_array(0);
    });
  };
  expect_error(with_piggy([](MsgPacker& p) { p.pack_array(1); p.pack(1); }), ErrorCode::kProtocol, "nil or a map");
  expect_error(with_piggy([](MsgPacker& p) { p.pack_map(1); p.pack(1); p.pack(2); }), ErrorCode::kProtocol,
               "keys must be str");
  expect_error(with_piggy([](MsgPacker& p) { p.pack_map(1); pack_s(p, "m"); p.pack_map(1); p.pack_nil(); p.pack(2); }),
               ErrorCode::kProtocol, "keys must be str");
}

// --- decode into caller storage ------------------------------------------------------------

TEST(Allocator, SeesEachSegmentAndItsTensorType) {
  Dict v{{"t", Tensor::zeros(DType::kFloat16, {2, 3})}, {"b", Bytes("hello")}};
  Bytes8 wire = encode_flat(v);
  std::vector<SegmentSpec> seen;
  std::vector<Shape> shapes;
  CodecOptions options;
  options.allocate = [&](const SegmentSpec& spec) -> Result<Buffer> {
    seen.push_back(spec);
    shapes.push_back(spec.shape ? *spec.shape : Shape{});
    return Buffer::allocate(spec.nbytes);
  };
  auto r = decode_frame(wire, options);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().root, Value(v));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].index, 0u);
  EXPECT_EQ(seen[0].nbytes, 12u);
  EXPECT_EQ(seen[0].dtype, DType::kFloat16);
  EXPECT_EQ(shapes[0], (Shape{2, 3}));
  EXPECT_EQ(seen[1].index, 1u);
  EXPECT_FALSE(seen[1].dtype.has_value());
  EXPECT_EQ(seen[1].nbytes, 5u);
}

TEST(Allocator, ErrorsAndWrongSizesFailTheDecode) {
  Bytes8 wire = encode_flat(Bytes("hello"));
  CodecOptions failing;
  failing.allocate = [](const SegmentSpec&) -> Result<Buffer> { return Error{ErrorCode::kCancelled, "no room"}; };
  EXPECT_EQ(decode_frame(wire, failing).error().code, ErrorCode::kCancelled);
  CodecOptions wrong;
  wrong.allocate = [](const SegmentSpec& s) -> Result<Buffer> { return Buffer::allocate(s.nbytes + 1); };
  EXPECT_EQ(decode_frame(wire, wrong).error().code, ErrorCode::kInvalidArgument);
}

TEST(DecodeManifest, SegmentsAreTheNodesStorage) {
  Tensor t = Tensor::zeros(DType::kInt32, {4});
  auto frame = encode_data(List{Bytes("ab"), t}, None{}, 9, 3);
  ASSERT_TRUE(frame.ok());
  const auto& head = frame.value().head;
  auto h = parse_header(head.data(), CommConfig{});
  ASSERT_TRUE(h.ok());
  auto d = decode_data_manifest(h.value(), std::span(head).subspan(kHeaderSize));
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_EQ(d.value().segments.size(), 2u);
  const auto& items = d.value().root.as<List>().items;
  EXPECT_EQ(d.value().segments[0].data(), items[0].as<Bytes>().buffer.data());
  EXPECT_EQ(d.value().segments[1].data(), items[1].as<Tensor>().data());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(items[1].as<Tensor>().data()) % kBufferAlignment, 0u);
}

// --- mutation fuzz ---------------------------------------------------------------------------

TEST(Fuzz, MutatedGoldenFramesNeverCrashTheDecoder) {
  std::vector<Bytes8> corpus;
  for (const auto& e : fs::directory_iterator(kVectors))
    if (e.path().extension() == ".bin") corpus.push_back(read_file(e.path()));
  ASSERT_FALSE(corpus.empty());
  CommConfig unsafe;
  unsafe.allow_unsafe_pickle = true;
  CommConfig tight;
  tight.max_container_depth = 3;
  tight.max_container_nodes = 20;
  tight.max_segments = 2;
  tight.max_metadata_bytes = 16;
  const CodecOptions option_sets[] = {{}, {.limits = &unsafe, .registry = &test_registry()}, {.limits = &tight}};

  // CI runs a short fixed-seed pass; WCOMM_LONG_TESTS=1 runs a long one from a fresh seed
  // (printed; WCOMM_FUZZ_SEED=N replays it).
  const bool long_run = std::getenv("WCOMM_LONG_TESTS") != nullptr;
  const char* seed_text = std::getenv("WCOMM_FUZZ_SEED");
  const std::uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 0)
                             : long_run ? std::random_device{}()
                                        : 0xC0111u;
  const int iterations = long_run ? 400000 : 6000;
  if (long_run || seed_text) std::printf("fuzz: %d iterations, WCOMM_FUZZ_SEED=%llu\n", iterations,
                                         static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return n ? static_cast<std::size_t>(rng() % n) : 0; };
  std::size_t decoded = 0;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    Bytes8 f = corpus[pick(corpus.size())];
    int mutations = 1 + static_cast<int>(pick(4));
    for (int m = 0; m < mutations; ++m) {
      switch (pick(6)) {
        case 0:  // flip a bit
          if (!f.empty()) f[pick(f.size())] ^= static_cast<std::uint8_t>(1u << pick(8));
          break;
        case 1:  // replace a byte, favouring interesting values
          if (!f.empty()) {
            static const std::uint8_t interesting[] = {0x00, 0xff, 0x7f, 0x80, 0xc0, 0xc1, 0xdc, 0xdd, 0xde, 0xdf, 0xd9, 0xcf};
            f[pick(f.size())] = pick(2) ? interesting[pick(std::size(interesting))] : static_cast<std::uint8_t>(rng());
          }
          break;
        case 2:  // truncate
          f.resize(pick(f.size() + 1));
          break;
        case 3:  // insert random bytes
          for (std::size_t k = 0, n = 1 + pick(8); k < n; ++k)
            f.insert(f.begin() + static_cast<std::ptrdiff_t>(pick(f.size() + 1)), static_cast<std::uint8_t>(rng()));
          break;
        case 4:  // erase a run
          if (!f.empty()) {
            std::size_t at = pick(f.size());
            f.erase(f.begin() + static_cast<std::ptrdiff_t>(at),
                    f.begin() + static_cast<std::ptrdiff_t>(std::min(f.size(), at + 1 + pick(8))));
          }
          break;
        case 5:  // rewrite a header size field so the header agrees with a mutated body
          if (f.size() >= kHeaderSize) {
            std::uint32_t manifest = static_cast<std::uint32_t>(f.size() - kHeaderSize);
            if (pick(2)) manifest = static_cast<std::uint32_t>(pick(manifest + 1));
            for (int k = 0; k < 4; ++k) f[20 + k] = static_cast<std::uint8_t>(manifest >> (24 - 8 * k));
            std::uint64_t payload = f.size() - kHeaderSize - manifest;
            for (int k = 0; k < 8; ++k) f[28 + k] = static_cast<std::uint8_t>(payload >> (56 - 8 * k));
          }
          break;
      }
    }
    for (const auto& options : option_sets) {
      auto r = decode_frame(f, options);
      if (!r.ok()) {
        EXPECT_FALSE(r.error().message.empty());
        continue;
      }
      ++decoded;
      // Whatever decodes re-encodes, and the canonical encoding is a fixed point.
      if (r.value().header.kind != FrameKind::kData) continue;
      auto again = encode_data(r.value().root, r.value().piggypayload, r.value().header.tag,
                               r.value().header.message_id, options);
      ASSERT_TRUE(again.ok()) << again.error().message;
      Bytes8 canonical = flatten(again.value());
      auto second = decode_frame(canonical, options);
      ASSERT_TRUE(second.ok()) << second.error().message;
      auto third = encode_data(second.value().root, second.value().piggypayload, second.value().header.tag,
                               second.value().header.message_id, options);
      ASSERT_TRUE(third.ok());
      EXPECT_EQ(to_hex(flatten(third.value())), to_hex(canonical));
    }
  }
  EXPECT_GT(decoded, 0u);  // some mutations (e.g. in tensor data) still decode
}

}  // namespace
}  // namespace wcomm
