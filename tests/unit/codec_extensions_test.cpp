// wcomm's negotiated wire extensions (docs/wire-format.md): the HEARTBEAT and ACK control
// frames and the DATA flag that asks for an ACK. A V0.1 peer never sees any of them.
#include <gtest/gtest.h>

#include "wcomm/codec.h"

namespace wcomm {
namespace {

FrameHeader header_of(const std::vector<std::uint8_t>& frame) {
  auto h = parse_header(frame.data(), CommConfig{});
  EXPECT_TRUE(h.ok()) << h.error().message;
  return h.value();
}

TEST(WireExtensions, HeartbeatAndAckFramesRoundTrip) {
  const auto heartbeat = encode_control(FrameKind::kHeartbeat, {});
  EXPECT_EQ(heartbeat[6], 32);
  EXPECT_EQ(header_of(heartbeat).kind, FrameKind::kHeartbeat);
  Control acks;
  acks.acks = {1, 42, (1ull << 63) + 5};
  const auto frame = encode_control(FrameKind::kAck, acks);
  EXPECT_EQ(frame[6], 33);
  const FrameHeader h = header_of(frame);
  auto decoded = decode_control(h, std::span<const std::uint8_t>(frame).subspan(kHeaderSize, h.manifest_size));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded.value().acks, acks.acks);
}

TEST(WireExtensions, TheAckFlagIsAcceptedOnDataFramesOnly) {
  auto data = encode_data(Value(1), {}, 0, 7).value();
  std::vector<std::uint8_t> head(data.head.begin(), data.head.begin() + kHeaderSize);
  head[7] = kFlagAckRequested;
  EXPECT_EQ(header_of(head).flags, kFlagAckRequested);
  head[7] = 0x01;  // any other flag is still a protocol error
  EXPECT_FALSE(parse_header(head.data(), CommConfig{}).ok());
  auto heartbeat = encode_control(FrameKind::kHeartbeat, {});
  heartbeat[7] = kFlagAckRequested;  // not on a control frame
  auto r = parse_header(heartbeat.data(), CommConfig{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("flags"), std::string::npos);
}

TEST(WireExtensions, MalformedAcksAreProtocolErrors) {
  Control c;
  c.acks = {3};
  auto frame = encode_control(FrameKind::kAck, c);
  // Turn the id (positive fixint 3, the last byte before "segments") into a string's tag.
  const FrameHeader h = header_of(frame);
  std::vector<std::uint8_t> manifest(frame.begin() + kHeaderSize, frame.end());
  for (auto& b : manifest)
    if (b == 0x03) {
      b = 0xa0;  // an empty str
      break;
    }
  auto decoded = decode_control(h, manifest);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().code, ErrorCode::kProtocol);
}

}  // namespace
}  // namespace wcomm

namespace wcomm {
namespace {

// "retry-key": DATA flag 0x08 and a fourth manifest key, "retry_key"; without the flag the
// frame is byte for byte what V0.1 would write.
TEST(WireExtensions, ARetryKeyTravelsInTheManifestUnderItsFlag) {
  CodecOptions with;
  with.retry_key = (1ull << 63) + 9;
  auto keyed = encode_data(Value(Bytes(std::string(8, 'k'))), Value(), 5, 1, with);
  ASSERT_TRUE(keyed.ok()) << keyed.error().message;
  const FrameHeader h = header_of(keyed.value().head);
  EXPECT_EQ(h.flags, kFlagRetryKey);
  auto decoded = decode_data_manifest(h, std::span<const std::uint8_t>(keyed.value().head).subspan(kHeaderSize));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded.value().retry_key, with.retry_key);
  EXPECT_TRUE(decoded.value().root.is<Bytes>());  // (its segment allocated, not yet read)

  auto plain = encode_data(Value(Bytes(std::string(8, 'k'))), Value(), 5, 1);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(header_of(plain.value().head).flags, 0);
  // The key without its flag, or the flag without its key, is malformed.
  FrameHeader unflagged = h;
  unflagged.flags = 0;
  EXPECT_FALSE(decode_data_manifest(unflagged, std::span<const std::uint8_t>(keyed.value().head).subspan(kHeaderSize)).ok());
  FrameHeader flagged = header_of(plain.value().head);
  flagged.flags = kFlagRetryKey;
  auto missing = decode_data_manifest(flagged, std::span<const std::uint8_t>(plain.value().head).subspan(kHeaderSize));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("retry_key"), std::string::npos) << missing.error().message;
}

}  // namespace
}  // namespace wcomm
