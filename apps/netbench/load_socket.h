// Plain-TCP helpers of the latency-under-load background traffic (the load server on the
// responder's port + 1, docs/wire-format.md): connect / listen, line I/O for the JSON-lines
// handshake, a paced (token bucket) sender and a counting drain.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace wcomm::bench {

// An owned socket descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  ~Socket();
  int fd() const { return fd_; }
  int release() { int fd = fd_; fd_ = -1; return fd; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Connects to host:port (numeric IPv4 or a name); throws std::runtime_error naming them.
Socket connect_tcp(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
// Listens on host:port ("" or "0.0.0.0": every address); throws std::runtime_error.
Socket listen_tcp(const std::string& host, std::uint16_t port);

// One '\n'-terminated line (without the '\n'), read a byte at a time so nothing past it is
// consumed; throws std::runtime_error on EOF, error or a line over 4 KiB.
std::string read_line(int fd);
// Writes all of `data`; throws std::runtime_error on failure.
void write_all(int fd, const std::string& data);

// Sends zero bytes at `mbps` (10^6 bit/s of payload) through a token bucket until `seconds`
// have passed or `stop` is set; returns the bytes written. A failed write ends it early.
std::uint64_t paced_send(int fd, double mbps, double seconds, const std::atomic<bool>& stop);
// Reads and counts bytes until EOF, an error or `stop`; returns the count.
std::uint64_t drain(int fd, const std::atomic<bool>& stop);

}  // namespace wcomm::bench
