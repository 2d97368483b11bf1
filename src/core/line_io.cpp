// read_line / write_all over a stream socket (line_io.h).
#include "core/line_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace wcomm {

namespace {

// Waits until fd is readable or deadline passes (false).
bool readable_by(int fd, SteadyClock::time_point deadline) {
  while (true) {
    int wait_ms = -1;
    if (deadline != SteadyClock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(time_left(deadline)).count();
      wait_ms = static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, wait_ms);
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // the read reports the failure
  }
}

}  // namespace

Result<std::string> read_line(int fd, SteadyClock::time_point deadline, std::size_t max_bytes) {
  std::string line;
  while (true) {
    if (!readable_by(fd, deadline)) return Error{ErrorCode::kOperationTimeout, "timed out before a whole line came"};
    char c = 0;
    const ssize_t got = ::recv(fd, &c, 1, 0);
    if (got == 0) return Error{ErrorCode::kConnectionClosed, "the connection closed before a whole line came"};
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error{ErrorCode::kConnectionClosed, std::string("read failed: ") + std::strerror(errno)};
    }
    if (c == '\n') return line;
    line.push_back(c);
    if (line.size() > max_bytes)
      return Error{ErrorCode::kProtocol, "a line longer than " + std::to_string(max_bytes) + " bytes"};
  }
}

Status write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{ErrorCode::kConnectionClosed, std::string("write failed: ") + std::strerror(errno)};
    done += static_cast<std::size_t>(n);
  }
  return Ok{};
}

}  // namespace wcomm
