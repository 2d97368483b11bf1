// The raw reference for bulk goodput at a given message size: two processes, one writing
// messages of `bytes` from one buffer of that size with blocking writes, the other reading
// each into one buffer of that size. Unlike iperf3 (one 128 KiB buffer that stays in cache),
// a 64 MiB message is read from and written to memory that does not fit any cache, as any
// zero-copy transfer of a 64 MiB tensor must. Usage: raw_tcp_bulk [bytes] [messages]
// Prints {"what", "payload_bytes", "messages", "goodput_gb_s"}.
#include <sys/wait.h>

#include <cstring>
#include <memory>

#include "raw_socket.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::size_t size = arg_or(argc, argv, 1, std::size_t{64} << 20);
  const std::uint64_t messages = arg_or(argc, argv, 2, 8);
  sockaddr_in address;
  const int listener = listen_on_loopback(address);
  const pid_t child = fork();
  if (child == 0) {
    close(listener);
    const auto buffer = touched_buffer(size);
    const int fd = connect_to(address);
    for (std::uint64_t i = 0; i < messages; ++i) exact_write(fd, buffer.get(), size);
    close(fd);
    _exit(0);
  }
  const auto buffer = touched_buffer(size);
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) die("raw_tcp_bulk: accept failed");
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < messages; ++i)
    if (!exact_read(fd, buffer.get(), size)) die("raw_tcp_bulk: the sender closed early");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  close(fd);
  waitpid(child, nullptr, 0);
  std::printf("{\"what\": \"raw_tcp_bulk\", \"payload_bytes\": %zu, \"messages\": %llu, \"goodput_gb_s\": %.3f}\n", size,
              static_cast<unsigned long long>(messages), static_cast<double>(size) * messages / seconds / 1e9);
  return 0;
}
