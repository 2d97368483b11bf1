// SocketStream's peek capability: a Unix stream socket's MSG_PEEK cost grows with what is
// queued, so frame readers read header and manifest one by one there (frame_reader.cpp).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>

#include "transport/socket_stream.h"

namespace wcomm::transport {
namespace {

TEST(SocketStream, PeekingIsCheapOnTcpButNotOnAUnixSocket) {
  asio::io_context io;
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  auto unix_stream = make_socket_stream_from_fd(io.get_executor(), pair[0], "unix pair");
  EXPECT_FALSE(unix_stream->cheap_peek());
  ::close(pair[1]);

  const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(tcp, 0);
  auto tcp_stream = make_socket_stream_from_fd(io.get_executor(), tcp, "tcp socket");
  EXPECT_TRUE(tcp_stream->cheap_peek());
}

}  // namespace
}  // namespace wcomm::transport
