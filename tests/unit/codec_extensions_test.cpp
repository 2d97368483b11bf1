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
