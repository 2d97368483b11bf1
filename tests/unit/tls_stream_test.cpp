// TlsStream's handshake: a dialer writes its HELLO and reads at once (comm's handshake does),
// and the TLS handshake must finish whichever of the two meets the server's reply first. The
// interleaving that once lost it (CommTls.SendAndReceiveFastPathsShareOneTlsConnection hung in
// CI): the write waits for the socket to be readable, a read takes the server's whole flight
// from the socket, and the write's wait is never woken, since nothing more comes until the
// HELLO is written. Here that interleaving is made by hand, step by step.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "transport/tls/tls_context.h"
#include "transport/tls/tls_stream.h"

namespace wcomm::transport {
namespace {

using namespace std::chrono_literals;

// A CA and certificates for node-a and node-b in a temporary folder (scripts/make-test-certs.sh).
class TestCerts {
 public:
  TestCerts() {
    char pattern[] = "/tmp/wcomm-tls-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    const std::string command = "bash " WCOMM_SOURCE_DIR "/scripts/make-test-certs.sh " + dir_ + " node-a node-b";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("make-test-certs.sh failed");
  }
  ~TestCerts() { std::filesystem::remove_all(dir_); }
  std::shared_ptr<const TlsContext> context(const std::string& node) const {
    return TlsContext::load({dir_ + "/" + node + ".pem", dir_ + "/" + node + ".key", dir_ + "/ca.pem"});
  }

 private:
  std::string dir_;
};

// Runs io until done() or the limit; whether done() came true.
template <class Done>
bool run_until(asio::io_context& io, Done done, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) {
    io.restart();
    io.run_one_for(20ms);
  }
  return done();
}

// Reads into `into` until it holds `size` bytes, as comm's frame reader does: try_read, and
// when that finds nothing, wait for the stream to be readable.
void read_on_loop(Connection& stream, std::string& into, std::size_t size, std::error_code& error) {
  char buffer[64];
  while (into.size() < size) {
    std::error_code ec;
    const std::size_t n = stream.try_read({asio::buffer(buffer, size - into.size())}, 0, ec);
    if (ec) {
      error = ec;
      return;
    }
    if (n == 0) break;
    into.append(buffer, n);
  }
  if (into.size() == size) return;
  stream.async_wait_readable([&stream, &into, size, &error](std::error_code ec) {
    if (ec) error = ec;
    else read_on_loop(stream, into, size, error);
  });
}

TEST(TlsStream, TheDialersWriteFinishesWhenItsReadTookTheServersReply) {
  TestCerts certs;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  asio::io_context client_io, server_io;
  auto client = make_tls_stream(client_io.get_executor(), fds[0], "client", certs.context("node-a"), false);
  auto server = make_tls_stream(server_io.get_executor(), fds[1], "server", certs.context("node-b"), true);

  // 1. The dialer writes its HELLO: the ClientHello goes out and the write waits.
  const std::string hello = "HELLO";
  bool written = false;
  std::error_code write_error;
  client->async_write({asio::buffer(hello)}, [&](std::error_code ec, std::size_t n) {
    write_error = ec;
    written = !ec && n == hello.size();
  });
  while (client_io.poll() > 0) client_io.restart();
  client_io.restart();

  // 2. The server answers with its whole flight, then waits for the dialer's Finished.
  std::string server_got;
  std::error_code server_error;
  read_on_loop(*server, server_got, hello.size(), server_error);
  // (The flight's records are written in one go once the ClientHello is read.)
  ASSERT_TRUE(run_until(server_io, [&] {
    pollfd p{fds[0], POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }));
  while (server_io.poll() > 0) server_io.restart();
  server_io.restart();

  // 3. The dialer's reader runs before its writer: it reads what the socket has.
  std::string client_got;
  std::error_code client_error;
  read_on_loop(*client, client_got, 3, client_error);

  // 4. The write must finish, and the server read the HELLO; its reply reaches the reader.
  std::thread server_thread([&] {
    run_until(server_io, [&] { return server_got.size() == hello.size() || server_error; });
    if (server_got == hello) server->async_write({asio::buffer("ACK", 3)}, [](std::error_code, std::size_t) {});
    run_until(server_io, [&] { return false; }, 300ms);
  });
  EXPECT_TRUE(run_until(client_io, [&] { return written || write_error; })) << "the HELLO write never finished";
  EXPECT_FALSE(write_error) << write_error.message();
  EXPECT_TRUE(run_until(client_io, [&] { return client_got.size() == 3 || client_error; }));
  server_thread.join();
  EXPECT_EQ(server_got, hello) << server_error.message();
  EXPECT_EQ(client_got, "ACK") << client_error.message();
  client->close();
  server->close();
}

}  // namespace
}  // namespace wcomm::transport
