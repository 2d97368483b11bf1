// FaultProxy: one thread, one ppoll() loop over the listener, every proxied socket and an
// eventfd through which the test thread hands it new settings.
#include "fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "free_port.h"

namespace wcomm::testing {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadSize = 64 * 1024;
// Read ahead of a slow sink per direction and connection; past it the source is not read,
// so backpressure reaches the sender.
constexpr std::size_t kMaxQueued = 256 * 1024;
constexpr auto kApplyLimit = std::chrono::seconds(5);
constexpr auto kResetDrainLimit = std::chrono::milliseconds(200);
constexpr auto kMaxPollWait = std::chrono::milliseconds(100);  // a safety net; wakes are explicit

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("FaultProxy: " + what + ": " + std::strerror(errno));
}

// A non-blocking listening socket on 127.0.0.1:port; -1 with errno set on failure.
int open_listener(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// Closes fd so that the other end gets an RST, not a FIN.
void close_with_reset(int fd) {
  linger lin{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, sizeof lin);
  ::close(fd);
}

std::uint64_t burst_of(std::uint64_t rate) { return std::clamp<std::uint64_t>(rate / 20, 1024, 64 * 1024); }

}  // namespace

struct FaultProxy::Settings {
  std::array<std::chrono::milliseconds, 2> delay{};
  std::array<std::uint64_t, 2> rate{};
  std::array<bool, 2> black_hole{};
  std::array<bool, 2> stall{};
  bool never_answer = false;
  bool listening = true;
  std::uint16_t target_port = 0;
  // Commands, consumed by the loop.
  std::uint64_t reset_requests = 0;
  std::array<bool, 2> arm_set{};                           // replace the reset_after budget...
  std::array<std::optional<std::uint64_t>, 2> arm_value{};  // ...with this (nullopt: none)
  // Bookkeeping.
  std::uint64_t requested = 0;  // generation of the last change
  std::uint64_t applied = 0;    // generation the loop has applied
  std::string listen_error;     // from the last reopen
  bool stop = false;
};

struct FaultProxy::Loop {
  // Sides of a connection: the client (accepted) and the target (dialed). Direction d reads
  // side d and writes side 1 - d (Direction::kToTarget == 0 == kClient).
  static constexpr int kClient = 0, kTarget = 1;

  struct Chunk {
    std::vector<std::uint8_t> bytes;
    std::size_t offset = 0;
    Clock::time_point due;
  };
  struct Pipe {
    std::deque<Chunk> queue;
    std::size_t queued = 0;
    bool eof = false;          // the source sent FIN
    bool shut = false;         // and it was passed on (shutdown of the sink)
    bool want_write = false;   // the sink was full: wait for POLLOUT
  };
  enum class State { kConnecting, kOpen, kSilent, kDead };
  struct Conn {
    std::array<int, 2> fd{-1, -1};
    std::array<Pipe, 2> pipe;
    std::array<bool, 2> hup_ignored{};  // a hung-up side not polled until it is read or written
    State state = State::kConnecting;
  };

  FaultProxy& self;
  sockaddr_in target{};
  int listen_fd = -1;
  std::vector<std::unique_ptr<Conn>> conns;
  Settings snap;  // the settings as of this iteration
  std::uint64_t resets_seen = 0;
  std::array<double, 2> tokens{};
  std::array<Clock::time_point, 2> refilled{};
  std::array<std::optional<std::uint64_t>, 2> budget{};  // reset_after: bytes left to forward
  std::optional<Clock::time_point> reset_deadline;       // reset_after ran out: RST by then
  FaultProxyCounters counts;
  std::vector<std::uint8_t> buffer = std::vector<std::uint8_t>(kReadSize);

  explicit Loop(FaultProxy& owner) : self(owner) {}

  ~Loop() {
    for (auto& c : conns) close_conn(*c, false);
    if (listen_fd >= 0) ::close(listen_fd);
  }

  void run() {
    while (true) {
      std::uint64_t generation;
      {
        std::lock_guard lock(self.mutex_);
        if (self.settings_->stop) return;
        Settings& s = *self.settings_;
        for (int d = 0; d < 2; ++d) {
          if (s.rate[d] != snap.rate[d]) {
            tokens[d] = static_cast<double>(burst_of(s.rate[d]));
            refilled[d] = Clock::now();
          }
          if (s.arm_set[d]) budget[d] = s.arm_value[d];
          s.arm_set[d] = false;
        }
        snap = s;
        generation = s.requested;
      }
      std::string listen_error = apply_commands();
      const auto next = forward_all();
      {
        std::lock_guard lock(self.mutex_);
        self.settings_->applied = generation;
        if (!listen_error.empty()) self.settings_->listen_error = listen_error;
        self.counters_ = counts;
      }
      self.changed_.notify_all();
      wait_and_handle(next);
    }
  }

  std::string apply_commands() {
    std::string error;
    if (!snap.listening && listen_fd >= 0) {
      ::close(listen_fd);
      listen_fd = -1;
    } else if (snap.listening && listen_fd < 0) {
      listen_fd = open_listener(self.port_);
      if (listen_fd < 0) error = std::string("cannot listen again on port ") + std::to_string(self.port_) + ": " +
                                 std::strerror(errno);
    }
    if (snap.reset_requests != resets_seen) {
      resets_seen = snap.reset_requests;
      reset_all();
    }
    for (int d = 0; d < 2; ++d) {
      if (budget[d] && *budget[d] == 0 && !reset_deadline) reset_deadline = Clock::now() + kResetDrainLimit;
    }
    return error;
  }

  void reset_all() {
    for (auto& c : conns) close_conn(*c, true);
    conns.clear();
  }

  // Closes both sockets of c (with an RST when reset) and retires it.
  void close_conn(Conn& c, bool reset) {
    if (c.state == State::kDead) return;
    for (int& fd : c.fd) {
      if (fd < 0) continue;
      if (reset) close_with_reset(fd); else ::close(fd);
      fd = -1;
    }
    c.state = State::kDead;
    --counts.connections_active;
    if (reset) ++counts.connections_reset;
  }

  // Writes what is due on every connection; returns when something next becomes due.
  std::optional<Clock::time_point> forward_all() {
    std::optional<Clock::time_point> next;
    const auto now = Clock::now();
    for (auto& c : conns) {
      for (int d = 0; d < 2; ++d) {
        if (auto t = forward(*c, d, now); t && (!next || *t < *next)) next = t;
      }
    }
    if (reset_deadline) {
      bool drained = true;
      for (auto& c : conns) {
        for (int fd : c->fd) {
          int unsent = 0;
          if (fd >= 0 && c->state == State::kOpen && ::ioctl(fd, SIOCOUTQ, &unsent) == 0 && unsent > 0) drained = false;
        }
      }
      if (drained || Clock::now() >= *reset_deadline) {
        reset_all();
        reset_deadline.reset();
        for (auto& b : budget) {
          if (b && *b == 0) b.reset();
        }
      } else {
        const auto soon = Clock::now() + std::chrono::milliseconds(2);
        if (!next || soon < *next) next = soon;
      }
    }
    std::erase_if(conns, [](const auto& c) { return c->state == State::kDead; });
    return next;
  }

  std::optional<Clock::time_point> forward(Conn& c, int d, Clock::time_point now) {
    if (c.state != State::kOpen) return {};
    Pipe& p = c.pipe[d];
    if (snap.black_hole[d]) {
      (d == 0 ? counts.dropped_to_target : counts.dropped_to_client) += p.queued;
      p.queue.clear();
      p.queued = 0;
      return {};
    }
    const int sink = c.fd[1 - d];
    while (!p.queue.empty()) {
      if (p.want_write) return {};
      if (budget[d] && *budget[d] == 0) return {};
      Chunk& chunk = p.queue.front();
      if (chunk.due > now) return chunk.due;
      std::size_t n = chunk.bytes.size() - chunk.offset;
      if (budget[d]) n = std::min<std::size_t>(n, *budget[d]);
      if (snap.rate[d] > 0) {
        const double rate = static_cast<double>(snap.rate[d]);
        const double burst = static_cast<double>(burst_of(snap.rate[d]));
        tokens[d] = std::min(burst, tokens[d] + rate * std::chrono::duration<double>(now - refilled[d]).count());
        refilled[d] = now;
        const double wanted = std::min(static_cast<double>(n), burst);
        if (tokens[d] < wanted) {
          return now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((wanted - tokens[d]) / rate));
        }
        n = std::min<std::size_t>(n, static_cast<std::size_t>(tokens[d]));
      }
      const ssize_t w = ::send(sink, chunk.bytes.data() + chunk.offset, n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          p.want_write = true;
          return {};
        }
        close_conn(c, true);
        return {};
      }
      const auto written = static_cast<std::size_t>(w);
      chunk.offset += written;
      p.queued -= written;
      (d == 0 ? counts.bytes_to_target : counts.bytes_to_client) += written;
      if (snap.rate[d] > 0) tokens[d] -= static_cast<double>(written);
      if (budget[d]) {
        *budget[d] -= written;
        if (*budget[d] == 0 && !reset_deadline) reset_deadline = now + kResetDrainLimit;
      }
      if (chunk.offset == chunk.bytes.size()) p.queue.pop_front();
    }
    if (p.eof && !p.shut) {
      ::shutdown(sink, SHUT_WR);
      p.shut = true;
      if (c.pipe[1 - d].shut) close_conn(c, false);
    }
    return {};
  }

  void wait_and_handle(std::optional<Clock::time_point> next) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Conn*, int>> owners;  // conn and side of fds[i], for i >= 2
    fds.push_back({self.wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd, static_cast<short>(listen_fd >= 0 ? POLLIN : 0), 0});
    for (auto& c : conns) {
      for (int side = 0; side < 2; ++side) {
        short events = 0;
        if (c->fd[side] < 0) continue;
        if (c->state == State::kSilent) {
          events = POLLIN;
        } else if (c->state == State::kConnecting) {
          if (side == kTarget) events = POLLOUT;
          else if (wants_read(*c, side)) events = POLLIN;
        } else {
          if (wants_read(*c, side)) events |= POLLIN;
          if (c->pipe[1 - side].want_write) events |= POLLOUT;  // side is the sink of direction 1 - side
        }
        const bool skip = c->hup_ignored[side] && events == 0;
        fds.push_back({skip ? -1 : c->fd[side], events, 0});
        owners.emplace_back(c.get(), side);
      }
    }
    auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(kMaxPollWait);
    if (next) wait = std::clamp(std::chrono::duration_cast<std::chrono::nanoseconds>(*next - Clock::now()),
                                std::chrono::nanoseconds(0), wait);
    timespec ts{static_cast<time_t>(wait.count() / 1'000'000'000), static_cast<long>(wait.count() % 1'000'000'000)};
    const int ready = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    if (ready <= 0) return;  // timeout or EINTR: the next iteration does what is due
    if (fds[0].revents) {
      std::uint64_t value;
      (void)!::read(self.wake_fd_, &value, sizeof value);
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents) handle(*owners[i - 2].first, owners[i - 2].second, fds[i].events, fds[i].revents);
    }
    if (fds[1].revents && listen_fd >= 0) accept_all();
  }

  bool wants_read(const Conn& c, int side) const {
    const Pipe& p = c.pipe[side];  // side is the source of direction `side`
    if (snap.stall[side] || p.eof) return false;
    return snap.black_hole[side] || p.queued < kMaxQueued;
  }

  void handle(Conn& c, int side, short events, short revents) {
    if (c.state == State::kDead) return;
    if (c.state == State::kConnecting && side == kTarget) {
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(c.fd[kTarget], SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        close_conn(c, true);  // the target refused: so does the proxy, with an RST
        return;
      }
      c.state = State::kOpen;
      return;
    }
    if (events & POLLIN) {
      read_from(c, side);
      if (c.state == State::kDead) return;
    }
    if (events & POLLOUT) c.pipe[1 - side].want_write = false;  // the write says what happened
    if (!(events & (POLLIN | POLLOUT))) {
      if (revents & POLLERR) close_conn(c, true);  // reset while not being read: pass it on
      else if (revents & POLLHUP) c.hup_ignored[side] = true;
    }
  }

  void read_from(Conn& c, int side) {
    Pipe& p = c.pipe[side];
    const bool drop = c.state == State::kSilent || snap.black_hole[side];
    for (int i = 0; i < 16; ++i) {
      if (!drop && p.queued >= kMaxQueued) return;
      const ssize_t r = ::recv(c.fd[side], buffer.data(), buffer.size(), 0);
      if (r > 0) {
        const auto n = static_cast<std::size_t>(r);
        if (drop) {
          (side == 0 ? counts.dropped_to_target : counts.dropped_to_client) += n;
        } else {
          p.queue.push_back({std::vector<std::uint8_t>(buffer.begin(), buffer.begin() + r), 0,
                             Clock::now() + snap.delay[side]});
          p.queued += n;
        }
        continue;
      }
      if (r == 0) {
        p.eof = true;
        if (c.state == State::kSilent) close_conn(c, false);
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      close_conn(c, true);  // reset (or another error) on this side: reset the other
      return;
    }
  }

  void accept_all() {
    while (true) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or an error a later poll reports again
      auto c = std::make_unique<Conn>();
      c->fd[kClient] = fd;
      ++counts.connections_accepted;
      ++counts.connections_active;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (snap.never_answer) {
        c->state = State::kSilent;
      } else {
        const int t = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        c->fd[kTarget] = t;
        if (t >= 0) ::setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sockaddr_in to = target;
        to.sin_port = htons(snap.target_port);
        const int rc = t < 0 ? -1 : ::connect(t, reinterpret_cast<const sockaddr*>(&to), sizeof to);
        if (rc == 0) {
          c->state = State::kOpen;
        } else if (errno != EINPROGRESS) {
          close_conn(*c, true);
          continue;
        }
      }
      conns.push_back(std::move(c));
    }
  }
};

FaultProxy::FaultProxy(std::uint16_t target_port, std::string target_host, std::uint16_t listen_port) {
  auto loop = std::make_unique<Loop>(*this);
  loop->target.sin_family = AF_INET;
  loop->target.sin_port = htons(target_port);
  if (::inet_pton(AF_INET, target_host.c_str(), &loop->target.sin_addr) != 1) {
    throw std::runtime_error("FaultProxy: the target host must be an IPv4 address, not '" + target_host + "'");
  }
  {
    // 0: a port below the ephemeral range (free_port.h), so that after a "refuse" the proxy
    // can listen on it again without a parallel test's connection having taken it.
    std::optional<ReservedPort> reserved;
    if (listen_port == 0) listen_port = reserved.emplace().port();
    loop->listen_fd = open_listener(listen_port);
  }
  if (loop->listen_fd < 0) throw sys_error("listen on 127.0.0.1:" + std::to_string(listen_port));
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(loop->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw sys_error("eventfd");
  settings_ = new Settings;
  settings_->target_port = target_port;
  loop_ = loop.release();
  thread_ = std::thread([this] { loop_->run(); });
}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard lock(mutex_);
    settings_->stop = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  thread_.join();
  delete loop_;  // closes every socket
  delete settings_;
  ::close(wake_fd_);
}

void FaultProxy::apply(const std::function<void(Settings&)>& change) {
  std::unique_lock lock(mutex_);
  change(*settings_);
  const std::uint64_t generation = ++settings_->requested;
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (!changed_.wait_for(lock, kApplyLimit, [&] { return settings_->applied >= generation; })) {
    throw std::runtime_error("FaultProxy: its thread did not apply a change within 5 s");
  }
}

void FaultProxy::set_delay(Direction direction, std::chrono::milliseconds delay) {
  apply([&](Settings& s) { s.delay[static_cast<int>(direction)] = delay; });
}

void FaultProxy::set_bandwidth(Direction direction, std::uint64_t bytes_per_second) {
  apply([&](Settings& s) { s.rate[static_cast<int>(direction)] = bytes_per_second; });
}

void FaultProxy::reset() {
  apply([](Settings& s) { ++s.reset_requests; });
}

void FaultProxy::reset_after(Direction direction, std::uint64_t bytes) {
  apply([&](Settings& s) {
    s.arm_set[static_cast<int>(direction)] = true;
    s.arm_value[static_cast<int>(direction)] = bytes;
  });
}

void FaultProxy::set_black_hole(Direction direction, bool on) {
  apply([&](Settings& s) { s.black_hole[static_cast<int>(direction)] = on; });
}

void FaultProxy::set_stall(Direction direction, bool on) {
  apply([&](Settings& s) { s.stall[static_cast<int>(direction)] = on; });
}

void FaultProxy::set_never_answer(bool on) {
  apply([&](Settings& s) { s.never_answer = on; });
}

void FaultProxy::set_target(std::uint16_t target_port) {
  apply([&](Settings& s) { s.target_port = target_port; });
}

void FaultProxy::refuse() {
  apply([](Settings& s) { s.listening = false; });
}

void FaultProxy::reopen() {
  apply([](Settings& s) {
    s.listening = true;
    s.listen_error.clear();
  });
  std::lock_guard lock(mutex_);
  if (!settings_->listen_error.empty()) throw std::runtime_error("FaultProxy: " + settings_->listen_error);
}

void FaultProxy::heal() {
  apply([](Settings& s) {
    for (int d = 0; d < 2; ++d) {
      s.delay[d] = {};
      s.rate[d] = 0;
      s.black_hole[d] = false;
      s.stall[d] = false;
      s.arm_set[d] = true;
      s.arm_value[d] = std::nullopt;
    }
    s.never_answer = false;
    s.listening = true;
    s.listen_error.clear();
  });
  std::lock_guard lock(mutex_);
  if (!settings_->listen_error.empty()) throw std::runtime_error("FaultProxy: " + settings_->listen_error);
}

FaultProxyCounters FaultProxy::counters() {
  // A round trip through the loop: whatever a Comm has seen the proxy do (a byte arrive, a
  // reset) is in the counters returned, though the loop publishes them after it acted.
  apply([](Settings&) {});
  std::lock_guard lock(mutex_);
  return counters_;
}

bool FaultProxy::wait_until(const std::function<bool(const FaultProxyCounters&)>& pred,
                            std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return pred(counters_); });
}

}  // namespace wcomm::testing
