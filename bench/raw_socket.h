// Plain blocking loopback TCP for the raw reference programs (no wcomm): a listener, a
// connected pair across a fork, and exact reads and writes.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <memory>

#include "bench_common.h"

namespace wcomm::bench_programs {

inline void exact_write(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) die("raw reference: write failed");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Returns false at end of stream.
inline bool exact_read(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = read(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

inline void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A listener on an ephemeral loopback port; `address` gets where to connect.
inline int listen_on_loopback(sockaddr_in& address) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    die("raw reference: cannot listen on loopback");
  return listener;
}

inline int connect_to(const sockaddr_in& address) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) die("raw reference: connect failed");
  set_nodelay(fd);
  return fd;
}

// A buffer of `size` bytes with every page touched. Allocate it after a fork: pages shared
// across a fork would be copied on the first write, and the loop would pay the faults.
inline std::unique_ptr<char[]> touched_buffer(std::size_t size) {
  std::unique_ptr<char[]> buffer(new char[size]);
  std::memset(buffer.get(), 1, size);
  return buffer;
}

}  // namespace wcomm::bench_programs
