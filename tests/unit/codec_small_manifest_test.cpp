// The small-manifest decoder (src/core/codec_small_manifest.cpp) against the general one:
// it takes the common manifests, and whatever it takes, the general decoder decodes to the
// same value; a mutated manifest it takes is one the general decoder takes too.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/codec_internal.h"
#include "wcomm/codec.h"

namespace wcomm {
namespace {

struct Encoded {
  FrameHeader header;
  std::vector<std::uint8_t> manifest;
};

Encoded encode(const Value& root, const Value& piggy = None{}) {
  auto frame = encode_data(root, piggy, 7, 1);
  EXPECT_TRUE(frame.ok()) << frame.error().message;
  const auto& head = frame.value().head;
  auto header = parse_header(head.data(), CommConfig{});
  EXPECT_TRUE(header.ok());
  return {header.value(), std::vector<std::uint8_t>(head.begin() + kHeaderSize, head.end())};
}

// What a decoded value is, without its (unfilled) bytes.
std::string skeleton(const DecodedData& d) {
  std::string out = d.piggypayload.is_none() ? "nil;" : "piggy;";
  out += std::to_string(d.segments.size()) + " segments;";
  if (d.root.is<Bytes>()) {
    const auto& b = d.root.as<Bytes>();
    out += "bytes " + std::to_string(b.size());
    if (!d.segments.empty() && d.segments[0].data() != b.buffer.data()) out += " (not its segment)";
  } else if (d.root.is<Tensor>()) {
    const auto& t = d.root.as<Tensor>();
    out += "tensor " + std::string(dtype_name(t.dtype())) + " [";
    for (auto dim : t.shape()) out += std::to_string(dim) + ",";
    out += "] " + std::to_string(t.nbytes());
    if (!d.segments.empty() && d.segments[0].data() != t.data()) out += " (not its segment)";
  } else {
    out += "another kind";
  }
  return out;
}

// The general decoder's verdict: the skeleton, or "refused: <code>".
std::string general(const FrameHeader& h, std::span<const std::uint8_t> m, const CodecOptions& options = {}) {
  auto r = codec_detail::run_guarded(
      [&]() -> Result<DecodedData> { return codec_detail::decode_manifest_generally(h, m, options); });
  return r ? skeleton(r.value()) : "refused: " + std::string(error_code_name(r.error().code));
}

std::optional<std::string> small(const FrameHeader& h, std::span<const std::uint8_t> m, const CodecOptions& options = {}) {
  auto r = codec_detail::run_guarded([&]() -> Result<std::optional<DecodedData>> {
    return codec_detail::decode_small_manifest(h, m, options);
  });
  if (!r) return "refused: " + std::string(error_code_name(r.error().code));
  if (!r.value()) return std::nullopt;
  return skeleton(*r.value());
}

std::vector<Value> common_values() {
  std::vector<Value> values;
  for (std::size_t n : {0u, 1u, 64u, 127u, 128u, 255u, 256u, 65535u, 65536u, 1u << 20})
    values.push_back(Bytes(std::string(n, 'x')));
  for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kFloat16,
                      DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kBool}) {
    values.push_back(Tensor::zeros(dtype, {}));
    values.push_back(Tensor::zeros(dtype, {3}));
    values.push_back(Tensor::zeros(dtype, {2, 0, 4}));
  }
  values.push_back(Tensor::zeros(DType::kFloat32, {300, 200}));
  values.push_back(Tensor::zeros(DType::kUInt8, Shape(15, 1)));  // the most a fixarray holds
  return values;
}

TEST(SmallManifest, TakesEveryCommonMessageAndAgreesWithTheGeneralDecoder) {
  for (const Value& v : common_values()) {
    const Encoded e = encode(v);
    const auto fast = small(e.header, e.manifest);
    ASSERT_TRUE(fast.has_value()) << "not taken: " << general(e.header, e.manifest);
    EXPECT_EQ(*fast, general(e.header, e.manifest));
    EXPECT_EQ(fast->find("refused"), std::string::npos) << *fast;
  }
}

TEST(SmallManifest, LeavesEverythingElseToTheGeneralDecoder) {
  const Value others[] = {None{},
                          Value(std::int64_t(5)),
                          Value(std::string("text")),
                          List{Bytes("ab")},
                          Dict{{Value(std::string("k")), Value(Bytes("v"))}},
                          Tensor::zeros(DType::kUInt8, Shape(16, 1))};  // shape past a fixarray
  for (const Value& v : others) {
    const Encoded e = encode(v);
    EXPECT_FALSE(small(e.header, e.manifest).has_value()) << general(e.header, e.manifest);
  }
  // A piggypayload, however small, is the general decoder's.
  const Encoded with_piggy = encode(Bytes("ab"), Dict{{Value(std::string("k")), Value(std::int64_t(1))}});
  EXPECT_FALSE(small(with_piggy.header, with_piggy.manifest).has_value());
}

TEST(SmallManifest, DeclinesWhatTheHeaderContradicts) {
  const Encoded e = encode(Bytes(std::string(100, 'x')));
  for (auto change : {+[](FrameHeader& h) { h.payload_size = 99; }, +[](FrameHeader& h) { h.segment_count = 2; },
                      +[](FrameHeader& h) { h.segment_count = 0; }}) {
    FrameHeader h = e.header;
    change(h);
    EXPECT_FALSE(small(h, e.manifest).has_value());
    EXPECT_EQ(general(h, e.manifest).rfind("refused", 0), 0u);
  }
}

TEST(SmallManifest, UsesTheAllocatorAndReportsItsFailure) {
  const Encoded e = encode(Tensor::zeros(DType::kFloat32, {2, 3}));
  std::vector<SegmentSpec> seen;
  Shape shape;
  CodecOptions counting;
  counting.allocate = [&](const SegmentSpec& spec) -> Result<Buffer> {
    seen.push_back(spec);
    shape = spec.shape ? *spec.shape : Shape{};
    return Buffer::allocate(spec.nbytes);
  };
  ASSERT_TRUE(small(e.header, e.manifest, counting).has_value());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].index, 0u);
  EXPECT_EQ(seen[0].nbytes, 24u);
  EXPECT_EQ(seen[0].dtype, DType::kFloat32);
  EXPECT_EQ(shape, (Shape{2, 3}));

  CodecOptions failing;
  failing.allocate = [](const SegmentSpec&) -> Result<Buffer> { return Error{ErrorCode::kCancelled, "no room"}; };
  EXPECT_EQ(small(e.header, e.manifest, failing), "refused: " + std::string(error_code_name(ErrorCode::kCancelled)));
  CodecOptions wrong;
  wrong.allocate = [](const SegmentSpec& s) -> Result<Buffer> { return Buffer::allocate(s.nbytes + 1); };
  EXPECT_EQ(small(e.header, e.manifest, wrong), "refused: " + std::string(error_code_name(ErrorCode::kInvalidArgument)));
}

TEST(SmallManifest, EncodesTheCommonMessagesByteForByteAsTheGeneralEncoder) {
  for (const Value& v : common_values()) {
    EncodedFrame fast, slow;
    ASSERT_TRUE(codec_detail::encode_small_manifest(v, None{}, {}, fast));
    codec_detail::encode_manifest_generally(v, None{}, {}, slow);
    EXPECT_EQ(fast.head, slow.head);
    EXPECT_EQ(fast.payload_bytes, slow.payload_bytes);
    ASSERT_EQ(fast.segments.size(), 1u);
    EXPECT_EQ(fast.segments[0].data(), slow.segments[0].data());  // the value's own memory, not a copy
  }
  const Value others[] = {None{}, Value(std::string("text")), List{Bytes("ab")},
                          Tensor::zeros(DType::kUInt8, Shape(16, 1))};
  for (const Value& v : others) {
    EncodedFrame frame;
    EXPECT_FALSE(codec_detail::encode_small_manifest(v, None{}, {}, frame));
    EXPECT_TRUE(frame.head.empty() && frame.segments.empty());
  }
  EncodedFrame frame;
  EXPECT_FALSE(codec_detail::encode_small_manifest(Bytes("ab"), Dict{{Value(std::string("k")), Value(true)}}, {}, frame));
  CommConfig no_segments;
  no_segments.max_segments = 0;
  EXPECT_FALSE(codec_detail::encode_small_manifest(Bytes("ab"), None{}, {.limits = &no_segments}, frame));
}

// Every manifest it takes after a mutation (a flipped, replaced, dropped or added byte), the
// general decoder takes as the same value.
TEST(SmallManifest, MutatedManifestsItTakesAreOnesTheGeneralDecoderTakesAlike) {
  std::mt19937_64 rng(0x5EED5u);
  const std::vector<Value> values = common_values();
  std::size_t taken = 0;
  for (int i = 0; i < 100000; ++i) {
    Encoded e = encode(values[rng() % values.size()]);
    auto& m = e.manifest;
    for (int k = 1 + int(rng() % 3); k > 0 && !m.empty(); --k) {
      const std::size_t at = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[at] ^= std::uint8_t(1u << (rng() % 8)); break;
        case 1: m[at] = std::uint8_t(rng()); break;
        case 2: m.erase(m.begin() + std::ptrdiff_t(at)); break;
        case 3: m.insert(m.begin() + std::ptrdiff_t(at), std::uint8_t(rng())); break;
      }
    }
    e.header.manifest_size = static_cast<std::uint32_t>(m.size());
    if (rng() % 4 == 0) e.header.payload_size ^= 1u << (rng() % 20);
    const auto fast = small(e.header, m);
    if (!fast) continue;
    ++taken;
    EXPECT_EQ(*fast, general(e.header, m)) << "manifest of " << m.size() << " bytes, iteration " << i;
  }
  EXPECT_GT(taken, 50u);  // (some mutations keep a valid manifest: a length, a dtype, a dim)
}

}  // namespace
}  // namespace wcomm
