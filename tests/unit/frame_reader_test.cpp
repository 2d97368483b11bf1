// FrameReader over a scripted stream: frames cut wherever the bytes arrive come out whole and
// in order, whether the reader reads ahead (sockets) or reads each frame's parts where they
// go; reading ahead takes several small frames in one read of the transport.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/frame_reader.h"
#include "wcomm/codec.h"

namespace wcomm {
namespace {

// A transport connection whose incoming bytes are a fixed script: each read takes at most
// `arrived` bytes beyond what was taken (what "has arrived" so far), and counts itself.
class ScriptedStream final : public transport::Connection {
 public:
  ScriptedStream(std::vector<std::uint8_t> bytes, bool reads_ahead) : bytes_(std::move(bytes)), ahead_(reads_ahead) {}
  std::size_t arrived = SIZE_MAX;  // bytes readable beyond pos_ (SIZE_MAX: all of them)
  int reads = 0;

  std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                       std::error_code&) override {
    ++reads;
    std::size_t left = std::min(available(), asio::buffer_size(buffers) - skip), done = 0;
    for (const auto& b : buffers) {
      if (skip >= b.size()) {
        skip -= b.size();
        continue;
      }
      const std::size_t n = std::min(b.size() - skip, left);
      std::memcpy(static_cast<std::uint8_t*>(b.data()) + skip, bytes_.data() + pos_, n);
      pos_ += n, left -= n, done += n, skip = 0;
      if (arrived != SIZE_MAX) arrived -= n;
    }
    return done;
  }
  std::size_t try_peek(void* data, std::size_t size, std::error_code&) override {
    const std::size_t n = std::min(size, available());
    std::memcpy(data, bytes_.data() + pos_, n);
    return n;
  }

  void async_write(std::vector<asio::const_buffer>, transport::IoHandler) override { std::abort(); }
  std::size_t try_write(const std::vector<asio::const_buffer>&, std::error_code&) override { std::abort(); }
  void try_write_now(const void*, std::size_t) override {}
  void async_wait_readable(std::function<void(std::error_code)>) override { std::abort(); }
  void stop_waiting_readable() override {}
  Prepared prepare_wait(std::vector<pollfd>&) override { return Prepared::kReadable; }
  void shutdown(bool) override {}
  void close() override {}
  std::string describe() const override { return "scripted"; }
  Traits traits() const override {
    Traits t;
    t.name = "scripted";
    t.reads_ahead = ahead_;
    return t;
  }

 private:
  std::size_t available() const { return std::min(arrived, bytes_.size() - pos_); }
  std::vector<std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  bool ahead_;
};

// Frames of the values, back to back, as a sender writes them.
std::vector<std::uint8_t> frames_of(const std::vector<Value>& values) {
  std::vector<std::uint8_t> out;
  std::uint64_t id = 1;
  for (const Value& v : values) {
    auto frame = encode_data(v, None{}, 3, id++);
    EXPECT_TRUE(frame.ok()) << frame.error().message;
    out.insert(out.end(), frame.value().head.begin(), frame.value().head.end());
    for (const Buffer& s : frame.value().segments) out.insert(out.end(), s.data(), s.data() + s.size());
  }
  return out;
}

const CommConfig kLimits;  // (a FrameReader keeps a reference to its limits)

const FrameReader::DecodeData kDecode = [](const FrameHeader& h, std::span<const std::uint8_t> manifest) {
  return decode_data_manifest(h, manifest);
};

// Reads frames until the reader waits; their root values, in order.
std::vector<Value> read_available(FrameReader& reader) {
  std::vector<Value> out;
  while (reader.read(kDecode) == FrameReader::Status::kFrame) out.push_back(reader.take().data->root);
  EXPECT_FALSE(reader.failed()) << (reader.failed() ? reader.error().message : std::string());
  return out;
}

std::vector<Value> small_messages(int n) {
  std::vector<Value> values;
  for (int i = 0; i < n; ++i) values.push_back(Value(i));
  return values;
}

TEST(FrameReader, ReadingAheadTakesSeveralSmallFramesInOneRead) {
  const auto values = small_messages(30);  // about 1.5 KiB of frames
  ScriptedStream ahead(frames_of(values), true), direct(frames_of(values), false);
  FrameReader with(ahead, kLimits), without(direct, kLimits);
  EXPECT_EQ(read_available(with), values);
  EXPECT_EQ(read_available(without), values);
  EXPECT_LE(ahead.reads, 2);    // one read, and one that finds nothing more
  EXPECT_GE(direct.reads, 30);  // each frame read where it goes
}

TEST(FrameReader, FramesReadAheadWaitInTheReaderUntilTaken) {
  const auto values = small_messages(5);
  ScriptedStream stream(frames_of(values), true);
  FrameReader reader(stream, kLimits);
  ASSERT_EQ(reader.read(kDecode), FrameReader::Status::kFrame);
  EXPECT_EQ(reader.take().data->root, Value(0));
  EXPECT_TRUE(reader.holds_bytes());  // the other four came with it
  EXPECT_EQ(read_available(reader), std::vector<Value>(values.begin() + 1, values.end()));
  EXPECT_FALSE(reader.holds_bytes());  // a reader that waits holds nothing back
}

// Small and large frames mixed, arriving a few bytes to a few KiB at a time: every frame
// comes out whole, in order, in both ways of reading; a waiting reader holds nothing back.
TEST(FrameReader, FramesCutAnywhereComeOutWholeAndInOrder) {
  std::mt19937_64 rng(0xF4A3E5u);
  std::vector<Value> values;
  for (int i = 0; i < 200; ++i) {
    const std::size_t size = rng() % 4 == 0 ? rng() % (96 << 10) : rng() % 300;
    std::string text(size, 'a');
    for (auto& c : text) c = static_cast<char>('a' + rng() % 26);
    if (rng() % 2) values.push_back(Bytes(text));
    else values.push_back(List{Value(static_cast<std::int64_t>(i)), Bytes(text), Value(std::string("x"))});
  }
  const auto bytes = frames_of(values);
  for (bool ahead : {true, false}) {
    SCOPED_TRACE(ahead ? "reading ahead" : "reading where it goes");
    ScriptedStream stream(bytes, ahead);
    FrameReader reader(stream, kLimits);
    std::vector<Value> got;
    for (int step = 0; step < 1'000'000 && got.size() < values.size(); ++step) {
      stream.arrived = rng() % 3 == 0 ? rng() % 16 : rng() % 6000;
      for (Value& v : read_available(reader)) got.push_back(std::move(v));
      if (reader.failed()) break;
      EXPECT_FALSE(reader.holds_bytes());  // what was read ahead is taken first
    }
    ASSERT_EQ(got.size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(got[i], values[i]) << "frame " << i;
  }
}

}  // namespace
}  // namespace wcomm
