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
    std::uint64_t total = 0;
    for (const Desc& d : t->local) total += d.len;
    t->bytes_left.store(total, std::memory_order_relaxed);
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
      if (t->cancelled.load(std::memory_order_acquire) || t->state() != XferState::kPending) continue;
      // Claim the next chunk under the lock; if more is left the transfer goes straight back
      // to the queue, so other workers copy its next chunks at the same time (one large
      // transfer uses every worker) and transfers behind it get their turn chunk by chunk.
      Chunk c = claim(*t);
      t->active_steps.fetch_add(1);  // seq_cst: pairs with release()'s store of cancelled
      const bool more = t->next_desc < t->local.size();
      if (more) queue_.push_back(t);
      const bool wake_other = more && idle_ > 0;
      lock.unlock();
      if (wake_other) cv_.notify_one();
      move(t, c);
      lock.lock();
    }
  }

  struct Chunk {
    iovec local[kMaxIov];
    iovec far[kMaxIov];
    std::size_t n = 0;
    std::uint64_t bytes = 0;
  };

  // Under mu_: the next up-to-chunk_ bytes of the transfer, advancing its cursor.
  Chunk claim(Transfer& t) {
    Chunk c;
    while (t.next_desc < t.local.size() && c.n < kMaxIov && c.bytes < chunk_) {
      const Desc& l = t.local[t.next_desc];
      const std::uint64_t take = std::min<std::uint64_t>(l.len - t.next_offset, chunk_ - c.bytes);
      c.local[c.n] = {reinterpret_cast<void*>(l.addr + t.next_offset), take};
      c.far[c.n] = {reinterpret_cast<void*>(t.remote[t.next_desc].addr + t.next_offset), take};
      ++c.n;
      c.bytes += take;
      t.next_offset += take;
      if (t.next_offset == l.len) {
        ++t.next_desc;
        t.next_offset = 0;
      }
    }
    return c;
  }

  // Copies one claimed chunk; the chunk that brings the count of bytes left to zero
  // completes the transfer. Any failure completes it with the reason at once.
  void move(const std::shared_ptr<Transfer>& t, const Chunk& c) {
    const pid_t pid = static_cast<pid_t>(t->peer->meta.pid);
    std::uint64_t moved = 0;
    int err = 0;
    if (!t->cancelled.load()) {  // seq_cst: see run_worker
      const ssize_t r = t->op == Op::kWrite ? ::process_vm_writev(pid, c.local, c.n, c.far, c.n, 0)
                                            : ::process_vm_readv(pid, c.local, c.n, c.far, c.n, 0);
      if (r < 0) err = errno;
      else moved = static_cast<std::uint64_t>(r);
    }
    t->active_steps.fetch_sub(1, std::memory_order_acq_rel);
    if (err != 0) {
      done_(t, Error{ErrorCode::kConnectionClosed,
                     std::string(t->op == Op::kWrite ? "process_vm_writev" : "process_vm_readv") + " to agent '" +
                         t->peer->meta.name + "' (pid " + std::to_string(pid) + ") failed: " + std::strerror(err) +
                         (err == ESRCH ? " (the process is gone)" : "")});
      return;
    }
    if (moved != c.bytes) {
      // A short count means part of the range is not mapped in one of the processes.
      if (!t->cancelled.load(std::memory_order_acquire))
        done_(t, Error{ErrorCode::kInvalidArgument, "cma moved " + std::to_string(moved) + " of " + std::to_string(c.bytes) +
                                                        " bytes with agent '" + t->peer->meta.name +
                                                        "' (is all of the memory still mapped?)"});
      return;
    }
    if (t->bytes_left.fetch_sub(c.bytes, std::memory_order_acq_rel) == c.bytes) done_(t, Ok{});
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
