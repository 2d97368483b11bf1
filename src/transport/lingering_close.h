// Closing a stream socket without losing what was sent on it.
#pragma once

#include <chrono>

#include <asio.hpp>

namespace wcomm::transport {

// Takes fd (a connected stream socket) and closes it once the peer has had everything sent
// on it. Linux resets a socket closed with unread bytes in it and drops what it had not sent
// yet (a TCP RST); data that arrives after close() does the same. So this sends the end of
// stream after the data (shutdown SHUT_WR), then reads and drops what the peer still sends,
// on the executor, until the peer ends its side too (it has read everything before our end),
// the connection fails, or `linger` passes; only then is the descriptor closed. The
// executor's run() lasts until then. Safe to call with nothing to wait for: it ends at once.
void close_lingering(const asio::any_io_executor& executor, int fd, std::chrono::steady_clock::duration linger);

}  // namespace wcomm::transport
