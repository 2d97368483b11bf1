// SocketStream's traits, which comm's choices go by (never the description): a Unix stream
// socket is same-host and its MSG_PEEK cost grows with what is queued, so frame readers read
// header and manifest one by one there (frame_reader.cpp); TCP measures its link and names
// the host it comes from.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>

#include "transport/socket_stream.h"

namespace wcomm::transport {
namespace {

TEST(SocketStream, AUnixSocketIsSameHostWithoutACheapPeek) {
  asio::io_context io;
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  auto unix_stream = make_socket_stream_from_fd(io.get_executor(), pair[0], "unix pair");
  const auto t = unix_stream->traits();
  EXPECT_EQ(t.name, "unix");
  EXPECT_TRUE(t.same_host);
  EXPECT_FALSE(t.measures_link);
  EXPECT_FALSE(t.cheap_peek);
  EXPECT_TRUE(t.reads_ahead);
  EXPECT_EQ(unix_stream->peer_host(), "");
  ::close(pair[1]);
}

TEST(SocketStream, ATcpSocketMeasuresItsLinkAndNamesItsPeersHost) {
  asio::io_context io;
  const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(tcp, 0);
  auto tcp_stream = make_socket_stream_from_fd(io.get_executor(), tcp, "tcp 127.0.0.1:40000 <-> 192.0.2.7:9000");
  const auto t = tcp_stream->traits();
  EXPECT_EQ(t.name, "tcp");
  EXPECT_FALSE(t.same_host);
  EXPECT_TRUE(t.measures_link);
  EXPECT_TRUE(t.cheap_peek);
  EXPECT_EQ(tcp_stream->peer_host(), "192.0.2.7");
}

TEST(TransportDescription, RemoteHostIsTheAddressAfterTheArrowWithoutItsPort) {
  EXPECT_EQ(remote_host_of("ucx 127.0.0.1:28511 <-> 127.0.0.1:51154"), "127.0.0.1");
  EXPECT_EQ(remote_host_of("tls tcp 10.0.0.1:1 <-> [::1]:9000"), "[::1]");
  EXPECT_EQ(remote_host_of("shm ring"), "");
}

}  // namespace
}  // namespace wcomm::transport
