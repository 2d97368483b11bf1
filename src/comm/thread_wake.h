// A per-thread eventfd that a thread polls beside a socket while it reads for a recv, so
// that a completion from elsewhere (another connection, cancel, close) can wake it.
#pragma once

namespace wcomm {

// This thread's eventfd (created on first use, closed when the thread ends); -1 if the
// system refuses one.
int this_thread_wake_fd();
// Clears a wake-up that was signalled (detail::signal_wake_fd in wcomm/future.h).
void clear_wake_fd(int fd);

}  // namespace wcomm
