// read_line / write_all (src/core/line_io.h): the one line protocol of the JSON-lines
// handshakes (rendezvous, the benchmark's load traffic), over a real socket pair.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "core/line_io.h"

namespace {

using namespace std::chrono_literals;
using wcomm::ErrorCode;

struct SocketPair {
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_writer() { ::close(fd[1]); fd[1] = -1; }
  int fd[2] = {-1, -1};
};

constexpr auto kNever = wcomm::SteadyClock::time_point::max();

TEST(LineIo, ReadsOneLineAndLeavesWhatFollowsIt) {
  SocketPair s;
  ASSERT_TRUE(wcomm::write_all(s.fd[1], "READY\n{\"next\":1}\nrest").ok());
  auto first = wcomm::read_line(s.fd[0], kNever, 4096);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first.value(), "READY");
  auto second = wcomm::read_line(s.fd[0], kNever, 4096);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value(), "{\"next\":1}");
  char rest[8] = {};
  EXPECT_EQ(::recv(s.fd[0], rest, sizeof rest, 0), 4);  // nothing past the second line was taken
  EXPECT_STREQ(rest, "rest");
}

TEST(LineIo, AStreamThatEndsMidLineIsConnectionClosed) {
  SocketPair s;
  ASSERT_TRUE(wcomm::write_all(s.fd[1], "half a li").ok());
  s.close_writer();
  auto line = wcomm::read_line(s.fd[0], kNever, 4096);
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.error().code, ErrorCode::kConnectionClosed) << line.error().message;
}

TEST(LineIo, ADeadlineThatPassesIsATimeout) {
  SocketPair s;
  const auto start = wcomm::SteadyClock::now();
  auto line = wcomm::read_line(s.fd[0], wcomm::deadline_after(50ms), 4096);
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.error().code, ErrorCode::kOperationTimeout);
  EXPECT_GE(wcomm::SteadyClock::now() - start, 50ms);
}

TEST(LineIo, ALineOverTheBoundIsRefused) {
  SocketPair s;
  ASSERT_TRUE(wcomm::write_all(s.fd[1], std::string(100, 'x') + "\n").ok());
  auto line = wcomm::read_line(s.fd[0], kNever, 64);
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.error().code, ErrorCode::kProtocol);
  EXPECT_NE(line.error().message.find("64 bytes"), std::string::npos) << line.error().message;
}

TEST(LineIo, WritingToAClosedPeerFailsWithTheReason) {
  SocketPair s;
  ::close(s.fd[0]);
  s.fd[0] = -1;
  wcomm::Status written = wcomm::write_all(s.fd[1], "GO\n");  // no SIGPIPE: MSG_NOSIGNAL
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().code, ErrorCode::kConnectionClosed);
  EXPECT_NE(written.error().message.find("write failed"), std::string::npos) << written.error().message;
}

}  // namespace
