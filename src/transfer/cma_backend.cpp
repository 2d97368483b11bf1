// The cma backend: same-host transfers with process_vm_writev / process_vm_readv, run by a few
// worker threads that take turns over the transfers in flight, one chunk at a time.
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>
#include <vector>

#include "transfer/backend.h"

namespace wcomm::xfer {

namespace {

constexpr std::size_t kMaxIov = 1024;  // IOV_MAX: the most iovecs one call takes

int read_ptrace_scope() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (!(in >> scope)) return 0;  // no Yama: same-user processes may use cma on each other
  return scope;
}

class CmaBackend final : public Backend {
 public:
  CmaBackend(const AgentConfig& config, CompletionFn done) : done_(std::move(done)), chunk_(config.chunk_bytes) {
    caps_.kind = BackendKind::kCma;
    caps_.write = caps_.read = true;
    caps_.same_host_only = true;
    probe_permission(config);
    if (caps_.available) {
      const unsigned n = std::max(1u, config.cma_threads);
      for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { run_worker(); });
    }
  }

  ~CmaBackend() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    for (auto& t : queue_) done_(t, Error{ErrorCode::kClosed, "the agent was closed"});
  }

  Capabilities capabilities() const override { return caps_; }

  Status connect(RemoteAgent& remote) override {
    if (!caps_.available) return Error{ErrorCode::kInvalidArgument, "cma: " + caps_.reason};
    if (remote.meta.host_id != local_host_id())
      return Error{ErrorCode::kInvalidArgument, "cma: agent '" + remote.meta.name + "' is on another host (or pid namespace)"};
    const std::uint64_t start = process_start_time(remote.meta.pid);
    if (start == 0 || start != remote.meta.pid_start)
      return Error{ErrorCode::kInvalidArgument, "cma: the process of agent '" + remote.meta.name + "' (pid " +
                                                    std::to_string(remote.meta.pid) +
                                                    ") is gone or restarted: its metadata is stale"};
    // A one-byte read from an unmapped address: EFAULT means we may reach the process,
    // EPERM that ptrace rules (Yama, user, capabilities) forbid it.
    char byte = 0;
    iovec local{&byte, 1}, far{reinterpret_cast<void*>(1), 1};
    if (::process_vm_readv(static_cast<pid_t>(remote.meta.pid), &local, 1, &far, 1, 0) < 0 && errno == EPERM)
      return Error{ErrorCode::kInvalidArgument,
                   "cma: no ptrace permission on pid " + std::to_string(remote.meta.pid) + " (agent '" + remote.meta.name +
                       "'; kernel.yama.ptrace_scope=" + std::to_string(read_ptrace_scope()) +
                       "; the peer can allow it with allow_cma_from_any_process)"};
    return Ok{};
  }

  void start(const std::shared_ptr<Transfer>& t) override {
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      queue_.push_back(t);
      wake = idle_ > 0;
    }
    if (wake) cv_.notify_one();
  }

 private:
  void probe_permission(const AgentConfig& config) {
    // The syscalls themselves may be filtered (seccomp) or missing: try one on ourselves.
    char a = 1, b = 0;
    iovec local{&b, 1}, far{&a, 1};
    if (::process_vm_readv(::getpid(), &local, 1, &far, 1, 0) != 1) {
      caps_.reason = std::string("process_vm_readv is not allowed here: ") + std::strerror(errno);
      return;
    }
    const int scope = read_ptrace_scope();
    if (scope == 3) {
      caps_.reason = "kernel.yama.ptrace_scope=3 forbids process_vm_writev between processes";
      return;
    }
    if (scope == 1 && config.allow_cma_from_any_process) {
      // Scope 1 lets only our ancestors in; a peer agent usually is not one.
      if (::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0) {
        caps_.reason = std::string("prctl(PR_SET_PTRACER) failed: ") + std::strerror(errno);
        return;
      }
    }
    caps_.available = true;
  }

  void run_worker() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (stopping_) return;
      std::shared_ptr<Transfer> t = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      const bool finished = step(t);
      lock.lock();
      // Round robin: an unfinished transfer goes to the back, so a large one never holds
      // up the small ones behind it for more than one chunk.
      if (!finished) queue_.push_back(std::move(t));
    }
  }

  // Moves up to one chunk; true when the transfer is over (done, failed or cancelled).
  bool step(const std::shared_ptr<Transfer>& t) {
    std::lock_guard busy(t->busy);
    if (t->cancelled.load(std::memory_order_acquire) || t->state() != XferState::kPending) return true;
    iovec local[kMaxIov], far[kMaxIov];
    std::size_t n = 0;
    std::uint64_t want = 0;
    std::size_t d = t->next_desc;
    std::uint64_t off = t->next_offset;
    while (d < t->local.size() && n < kMaxIov && want < chunk_) {
      const std::uint64_t take = std::min<std::uint64_t>(t->local[d].len - off, chunk_ - want);
      local[n] = {reinterpret_cast<void*>(t->local[d].addr + off), take};
      far[n] = {reinterpret_cast<void*>(t->remote[d].addr + off), take};
      ++n;
      want += take;
      off += take;
      if (off == t->local[d].len) {
        ++d;
        off = 0;
      }
    }
    if (n == 0) {
      done_(t, Ok{});
      return true;
    }
    const pid_t pid = static_cast<pid_t>(t->peer->meta.pid);
    const ssize_t moved = t->op == Op::kWrite ? ::process_vm_writev(pid, local, n, far, n, 0)
                                              : ::process_vm_readv(pid, local, n, far, n, 0);
    if (moved < 0) {
      const int err = errno;
      done_(t, Error{ErrorCode::kConnectionClosed,
                     std::string(t->op == Op::kWrite ? "process_vm_writev" : "process_vm_readv") + " to agent '" +
                         t->peer->meta.name + "' (pid " + std::to_string(pid) + ") failed: " + std::strerror(err) +
                         (err == ESRCH ? " (the process is gone)" : "")});
      return true;
    }
    // Advance by what moved (a short count stops at an iovec boundary or inside one).
    std::uint64_t left = static_cast<std::uint64_t>(moved);
    while (left > 0) {
      const std::uint64_t rest = t->local[t->next_desc].len - t->next_offset;
      const std::uint64_t take = std::min(rest, left);
      t->next_offset += take;
      left -= take;
      if (t->next_offset == t->local[t->next_desc].len) {
        ++t->next_desc;
        t->next_offset = 0;
      }
    }
    if (moved == 0) {
      done_(t, Error{ErrorCode::kConnectionClosed, "cma moved no bytes to agent '" + t->peer->meta.name + "'"});
      return true;
    }
    if (t->next_desc >= t->local.size()) {
      done_(t, Ok{});
      return true;
    }
    return false;
  }

  CompletionFn done_;
  std::size_t chunk_;
  Capabilities caps_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Transfer>> queue_;
  int idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<Backend> make_cma_backend(const AgentConfig& config, CompletionFn done) {
  return std::make_unique<CmaBackend>(config, std::move(done));
}

}  // namespace wcomm::xfer
