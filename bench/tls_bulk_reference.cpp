// The plain OpenSSL reference for TLS bulk goodput: two processes over loopback, TLS 1.3 with
// mutual certificate checks and the cipher wcomm negotiates (TLS_AES_128_GCM_SHA256), one
// writing messages of `bytes` from one buffer with blocking SSL_write, the other reading each
// into one buffer with SSL_read. What a TLS transport could do at best with OpenSSL.
// Usage: tls_bulk_reference CERT_DIR [bytes] [messages]  (CERT_DIR from scripts/make-test-certs.sh
// with nodes echo and ping). Prints {"what", "payload_bytes", "messages", "goodput_gb_s", "cipher"}.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/wait.h>

#include <cstring>
#include <memory>

#include "raw_socket.h"

using namespace wcomm::bench_programs;

namespace {

SSL_CTX* context(const std::string& dir, const std::string& node) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
  SSL_CTX_set_num_tickets(ctx, 0);
  if (SSL_CTX_use_certificate_chain_file(ctx, (dir + "/" + node + ".pem").c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, (dir + "/" + node + ".key").c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr) != 1)
    die("tls_bulk_reference: cannot load the certificates in " + dir);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return ctx;
}

bool ssl_exact(SSL* ssl, char* data, std::size_t size, bool write) {
  while (size > 0) {
    const int chunk = static_cast<int>(std::min<std::size_t>(size, 1 << 30));
    const int n = write ? SSL_write(ssl, data, chunk) : SSL_read(ssl, data, chunk);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) die("usage: tls_bulk_reference CERT_DIR [bytes] [messages]");
  const std::string dir = argv[1];
  const std::size_t size = arg_or(argc, argv, 2, std::size_t{64} << 20);
  const std::uint64_t messages = arg_or(argc, argv, 3, 8);
  sockaddr_in address;
  const int listener = listen_on_loopback(address);
  const pid_t child = fork();
  if (child == 0) {
    close(listener);
    const auto buffer = touched_buffer(size);
    SSL* ssl = SSL_new(context(dir, "ping"));
    SSL_set_fd(ssl, connect_to(address));
    if (SSL_connect(ssl) != 1) die("tls_bulk_reference: the client handshake failed");
    for (std::uint64_t i = 0; i < messages; ++i)
      if (!ssl_exact(ssl, buffer.get(), size, true)) die("tls_bulk_reference: SSL_write failed");
    char done = 0;
    SSL_read(ssl, &done, 1);  // the receiver has everything
    _exit(0);
  }
  const auto buffer = touched_buffer(size);
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) die("tls_bulk_reference: accept failed");
  SSL* ssl = SSL_new(context(dir, "echo"));
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1) die("tls_bulk_reference: the server handshake failed");
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < messages; ++i)
    if (!ssl_exact(ssl, buffer.get(), size, false)) die("tls_bulk_reference: the sender closed early");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  char done = 1;
  SSL_write(ssl, &done, 1);
  waitpid(child, nullptr, 0);
  std::printf("{\"what\": \"tls_bulk_reference\", \"payload_bytes\": %zu, \"messages\": %llu, \"goodput_gb_s\": %.3f, "
              "\"cipher\": \"%s\"}\n",
              size, static_cast<unsigned long long>(messages), static_cast<double>(size) * messages / seconds / 1e9,
              SSL_get_cipher_name(ssl));
  return 0;
}
