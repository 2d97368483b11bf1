// The Agent: registration cache, remote agents, descriptor checks, backend choice, the table
// of posted transfers with their timeouts, and notifications over the Agent's Comm.
#include "wcomm/xfer/agent.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "transfer/backend.h"
#include "transfer/metadata.h"
#include "transfer/notify_channel.h"
#include "transfer/registration_cache.h"
#include "wcomm/comm.h"

namespace wcomm::xfer {

namespace {

Error invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

std::uint64_t new_generation() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::string describe(const Desc& d) {
  char text[96];
  std::snprintf(text, sizeof text, "[0x%llx, +%llu, dev %u]", static_cast<unsigned long long>(d.addr),
                static_cast<unsigned long long>(d.len), d.dev_id);
  return text;
}

// Where transfers' outcomes are published and waited for. A user who sees an outcome may
// destroy the agent at once, while the thread that published it is still on its way out, and
// a notification's send may complete after the agent is gone: so this lives apart, shared
// with those callbacks, and closing it (exclusive) waits for publishers (shared) in progress
// and stops later ones.
struct Outcomes {
  std::shared_mutex gate;
  bool closed = false;  // under gate
  std::mutex wait_mu;
  std::condition_variable wait_cv;
  std::atomic<int> waiters{0};

  // gate held shared, not closed. Wakes wait()ers only when there are any (no futex call per
  // transfer for pollers).
  void publish_locked(Transfer& t, XferState state, std::string why = {}) {
    if (!t.finish(state, std::move(why))) return;
    if (waiters.load() == 0) return;
    { std::lock_guard lock(wait_mu); }  // a waiter between its check and its sleep sees the state
    wait_cv.notify_all();
  }
  void publish(Transfer& t, XferState state, std::string why = {}) {
    std::shared_lock publishing(gate);
    if (!closed) publish_locked(t, state, std::move(why));
  }
  void close() {
    std::unique_lock closing(gate);
    closed = true;
  }
  // Sleeps until t is no longer pending or until passes (publish wakes it).
  void wait_until(const Transfer& t, std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(wait_mu);
    ++waiters;
    wait_cv.wait_until(lock, until, [&] { return t.state() != XferState::kPending; });
    --waiters;
  }
};

class AgentImpl final : public Agent {
 public:
  explicit AgentImpl(AgentConfig config) : config_(std::move(config)), generation_(new_generation()) {
    auto done = [this](const std::shared_ptr<Transfer>& t, Status s) { on_backend_done(t, std::move(s)); };
    // Only the backends this agent may use are started (auto: all of them).
    auto wanted = [&](BackendKind k) { return config_.backend == BackendKind::kAuto || config_.backend == k; };
    backends_[BackendKind::kCma] = wanted(BackendKind::kCma) ? make_cma_backend(config_, done)
                                                             : make_unselected_backend(BackendKind::kCma, config_.backend);
    backends_[BackendKind::kUcx] = wanted(BackendKind::kUcx) ? make_ucx_backend(config_, done)
                                                             : make_unselected_backend(BackendKind::kUcx, config_.backend);
    backends_[BackendKind::kTcp] =
        wanted(BackendKind::kTcp)
            ? make_tcp_backend(config_, generation_, done,
                               [this](std::uint64_t b, std::uint64_t e) {
                                 std::lock_guard lock(mu_);
                                 return cache_.find(b, e);
                               })
            : make_unselected_backend(BackendKind::kTcp, config_.backend);
    if (config_.comm) {
      notify_ = std::make_shared<NotifyChannel>(config_.comm);
      notify_->start();
    }
  }

  ~AgentImpl() override {
    outcomes_->close();  // after the publishers in progress; later ones publish nothing
    if (notify_) notify_->close();
    // Remotes hold backend state (ucx endpoints and rkeys) that must go before the backends.
    {
      std::lock_guard lock(transfers_mu_);
      transfers_.clear();
    }
    {
      std::lock_guard lock(mu_);
      remotes_.clear();
    }
    for (auto& [p, a] : allocations_) release_allocation(p, a.first, a.second);
    allocations_.clear();
    // Backends stop their threads; nothing they run may touch the agent after that.
    backends_.clear();
  }

  const std::string& name() const override { return config_.name; }
  std::uint64_t generation() const override { return generation_; }

  Capabilities capabilities(BackendKind kind) const override {
    if (kind != BackendKind::kAuto) {
      Capabilities c = backends_.at(kind)->capabilities();
      c.notifications = c.available && config_.comm != nullptr;
      return c;
    }
    Capabilities all;
    all.kind = BackendKind::kAuto;
    for (const auto& [k, b] : backends_) {
      const Capabilities c = capabilities(k);
      if (!c.available) continue;
      all.available = true;
      all.write |= c.write;
      all.read |= c.read;
      all.notifications |= c.notifications;
    }
    if (!all.available) all.reason = "no backend is available";
    return all;
  }

  Status register_memory(const void* addr, std::size_t len) override {
    if (addr == nullptr || len == 0) return invalid("register_memory: null address or zero length");
    const auto begin = reinterpret_cast<std::uint64_t>(addr);
    std::lock_guard lock(mu_);
    RegionChange change = cache_.add({begin, begin + len});
    if (Status s = apply(change); !s) {
      (void)apply(*cache_.remove({begin, begin + len}));
      return s;
    }
    return Ok{};
  }

  Status deregister(const void* addr, std::size_t len) override {
    const auto begin = reinterpret_cast<std::uint64_t>(addr);
    std::lock_guard lock(mu_);
    auto change = cache_.remove({begin, begin + len});
    if (!change) return invalid("deregister: no registration of " + describe({begin, len, 0}) + " (it must match a register_memory call)");
    return apply(*change);
  }

  Result<void*> allocate_memory(std::size_t len) override {
    if (len == 0) return invalid("allocate_memory: zero length");
    void* p = nullptr;
    BackendKind owner = BackendKind::kAuto;
    Backend& ucx = *backends_.at(BackendKind::kUcx);
    if (ucx.capabilities().available && (config_.backend == BackendKind::kAuto || config_.backend == BackendKind::kUcx)) {
      p = ucx.allocate(len);
      if (p) owner = BackendKind::kUcx;
    }
    if (!p) {
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return Error{ErrorCode::kInvalidArgument, "allocate_memory: mmap of " + std::to_string(len) + " bytes failed"};
      // Transparent huge pages where the kernel allows them: process_vm_writev pins and
      // copies huge-page-backed memory markedly faster (docs/performance.md).
      (void)::madvise(p, len, MADV_HUGEPAGE);
    }
    if (Status s = register_memory(p, len); !s) {
      release_allocation(p, len, owner);
      return s.error();
    }
    std::lock_guard lock(mu_);
    allocations_[p] = {len, owner};
    return p;
  }

  Status free_memory(void* addr) override {
    std::pair<std::size_t, BackendKind> a;
    {
      std::lock_guard lock(mu_);
      auto it = allocations_.find(addr);
      if (it == allocations_.end()) return invalid("free_memory: not memory allocate_memory returned");
      a = it->second;
      allocations_.erase(it);
    }
    Status s = deregister(addr, a.first);
    release_allocation(addr, a.first, a.second);
    return s;
  }

  DescList registered() const override {
    std::lock_guard lock(mu_);
    DescList out;
    for (const Range& r : cache_.regions()) out.push_back({r.begin, r.end - r.begin, 0});
    return out;
  }

  std::string metadata() const override {
    AgentMetadata m;
    m.name = config_.name;
    m.generation = generation_;
    m.host_id = local_host_id();
    m.pid = ::getpid();
    m.pid_start = process_start_time(m.pid);
    if (config_.comm) {
      m.comm_node = config_.comm->local().node_id;
      for (const Address& a : config_.comm->local().endpoints()) m.comm_addresses.push_back(a.to_string());
    }
    std::lock_guard lock(mu_);
    for (const Range& r : cache_.regions()) m.regions.push_back({r.begin, r.end - r.begin, 0});
    for (const auto& [k, b] : backends_) b->export_metadata(m);
    return encode_metadata(m);
  }

  Result<std::string> add_remote(std::string_view bytes) override {
    Result<AgentMetadata> decoded = decode_metadata(bytes);
    if (!decoded) return decoded.error();
    auto remote = std::make_shared<RemoteAgent>();
    remote->meta = std::move(decoded).value();
    remote->raw = std::string(bytes);
    const AgentMetadata& m = remote->meta;
    if (m.name == config_.name) return invalid("add_remote: that is this agent's own metadata ('" + m.name + "')");
    {
      std::lock_guard lock(mu_);
      // The same metadata again (a producer sees a consumer's with every request): keep the
      // connection already made.
      auto same = remotes_.find(m.name);
      if (same != remotes_.end() && same->second->raw == bytes) return m.name;
      auto known = newest_generation_.find(m.name);
      if (known != newest_generation_.end() && m.generation < known->second)
        return invalid("add_remote: stale metadata for agent '" + m.name + "': generation " + std::to_string(m.generation) +
                       " is older than generation " + std::to_string(known->second) +
                       " already loaded (the agent restarted since; ask it for fresh metadata)");
    }
    if (Status s = reach_comm_node(m); !s) return s.error();
    std::string why_not;
    for (BackendKind k : candidates()) {
      Backend& b = *backends_.at(k);
      if (!b.capabilities().available) {
        why_not += std::string(why_not.empty() ? "" : "; ") + backend_name(k) + ": " + b.capabilities().reason;
        continue;
      }
      Status s = b.connect(*remote);
      if (s) {
        remote->kind = k;
        break;
      }
      why_not += std::string(why_not.empty() ? "" : "; ") + s.error().message;
    }
    if (remote->kind == BackendKind::kAuto)
      return invalid("add_remote: no backend reaches agent '" + m.name + "' (" + why_not + ")");
    std::shared_ptr<RemoteAgent> old;
    {
      std::lock_guard lock(mu_);
      auto& newest = newest_generation_[m.name];
      if (m.generation < newest) return invalid("add_remote: stale metadata for agent '" + m.name + "'");
      newest = m.generation;
      old = std::exchange(remotes_[m.name], remote);
    }
    if (old) backends_.at(old->kind)->disconnect(*old);
    return m.name;
  }

  Status remove_remote(const std::string& name) override {
    std::shared_ptr<RemoteAgent> old;
    {
      std::lock_guard lock(mu_);
      auto it = remotes_.find(name);
      if (it == remotes_.end()) return invalid("remove_remote: no remote agent '" + name + "'");
      old = std::move(it->second);
      remotes_.erase(it);
    }
    backends_.at(old->kind)->disconnect(*old);
    return Ok{};
  }

  Result<BackendKind> backend_for(const std::string& name) const override {
    std::lock_guard lock(mu_);
    auto it = remotes_.find(name);
    if (it == remotes_.end()) return invalid("no remote agent '" + name + "' (add_remote its metadata first)");
    return it->second->kind;
  }

  Result<XferHandle> post(Op op, const DescList& local, const std::string& remote_name, const DescList& remote_descs,
                          PostOptions options) override {
    if (local.empty()) return invalid("post: empty descriptor list");
    if (local.size() != remote_descs.size())
      return invalid("post: " + std::to_string(local.size()) + " local descriptors but " +
                     std::to_string(remote_descs.size()) + " remote ones (they pair up one to one)");
    if (!options.notification.empty() && !config_.comm)
      return invalid("post: a notification needs the agent to have a Comm (AgentConfig.comm)");
    auto t = std::make_shared<Transfer>();
    {
      std::lock_guard lock(mu_);
      auto it = remotes_.find(remote_name);
      if (it == remotes_.end()) return invalid("post: no remote agent '" + remote_name + "' (add_remote its metadata first)");
      t->peer = it->second;
      for (std::size_t i = 0; i < local.size(); ++i) {
        const Desc& l = local[i];
        const Desc& r = remote_descs[i];
        if (l.len == 0 || l.len != r.len)
          return invalid("post: descriptor " + std::to_string(i) + ": local " + describe(l) + " and remote " + describe(r) +
                         " must have the same, non-zero length");
        if (l.dev_id != 0 || r.dev_id != 0)
          return invalid("post: descriptor " + std::to_string(i) + ": device " + std::to_string(std::max(l.dev_id, r.dev_id)) +
                         " memory is not supported (host memory is device 0)");
        if (l.addr + l.len < l.addr || !cache_.find(l.addr, l.addr + l.len))
          return invalid("post: local descriptor " + std::to_string(i) + " " + describe(l) + " is not inside registered memory");
        if (!inside(t->peer->meta.regions, r))
          return invalid("post: remote descriptor " + std::to_string(i) + " " + describe(r) +
                         " is not inside memory agent '" + remote_name + "' registered (per its metadata)");
      }
    }
    t->id = next_id_.fetch_add(1, std::memory_order_relaxed);
    t->op = op;
    t->local = local;
    t->remote = remote_descs;
    t->notification = std::move(options.notification);
    const auto timeout = options.timeout > std::chrono::duration<double>::zero() ? options.timeout : config_.default_timeout;
    t->deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
    {
      std::lock_guard lock(transfers_mu_);
      transfers_.emplace(t->id, t);
    }
    backends_.at(t->peer->kind)->start(t);
    return XferHandle{t->id};
  }

  XferStatus poll(XferHandle handle) override {
    std::shared_ptr<Transfer> t = find(handle);
    if (!t) return {XferState::kError, "unknown transfer handle " + std::to_string(handle.id)};
    if (t->state() == XferState::kPending && std::chrono::steady_clock::now() >= t->deadline) {
      t->cancelled.store(true, std::memory_order_release);
      t->finish(XferState::kError, "timed out (the transfer's deadline passed while it was still moving bytes to or from agent '" +
                                       t->peer->meta.name + "')");
    }
    return {t->state(), t->reason()};
  }

  XferStatus wait(XferHandle handle, std::chrono::duration<double> timeout) override {
    std::shared_ptr<Transfer> t = find(handle);
    if (!t) return {XferState::kError, "unknown transfer handle " + std::to_string(handle.id)};
    using Clock = std::chrono::steady_clock;
    const auto until = std::min(t->deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout));
    outcomes_->wait_until(*t, until);
    return poll(handle);
  }

  Status release(XferHandle handle) override {
    std::shared_ptr<Transfer> t;
    {
      std::lock_guard lock(transfers_mu_);
      auto it = transfers_.find(handle.id);
      if (it == transfers_.end()) return invalid("release: unknown transfer handle " + std::to_string(handle.id));
      t = std::move(it->second);
      transfers_.erase(it);
    }
    t->cancelled.store(true);  // seq_cst, against the cma worker's count of active chunks
    if (t->state() != XferState::kDone) backends_.at(t->peer->kind)->cancel(*t);
    // Waits out a chunk being copied (at most chunk_bytes; a bounded wait).
    while (t->active_steps.load() > 0) std::this_thread::yield();
    t->finish(XferState::kError, "released before it completed");
    return Ok{};
  }

  std::vector<Notification> take_notifications() override {
    return notify_ ? notify_->take() : std::vector<Notification>{};
  }

  Status send_notification(const std::string& remote, const std::string& message,
                           std::chrono::duration<double> timeout) override {
    if (!notify_) return invalid("send_notification: the agent has no Comm to send it on (AgentConfig.comm)");
    std::string node;
    {
      std::lock_guard lock(mu_);
      auto it = remotes_.find(remote);
      if (it == remotes_.end()) return invalid("send_notification: no remote agent '" + remote + "' (add_remote it first)");
      node = it->second->meta.comm_node;
    }
    if (node.empty()) return invalid("send_notification: remote agent '" + remote + "' has no Comm");
    auto sent = std::make_shared<std::promise<Status>>();
    auto result = sent->get_future();
    // The send's own timeout bounds the wait: its outcome always comes.
    notify_->send(node, config_.name, message, [sent](Status s) { sent->set_value(std::move(s)); }, Seconds(timeout.count()));
    return result.get();
  }

 private:
  // The remote's Comm node becomes a peer of ours at the addresses its metadata lists, unless
  // our Comm reaches it already: at one of them, or over a connection up now (a node that
  // joined us after restarting elsewhere: replacing its entry would end that very connection).
  Status reach_comm_node(const AgentMetadata& m) {
    if (!config_.comm || m.comm_node.empty() || m.comm_addresses.empty()) return Ok{};
    std::vector<Address> addresses;
    try {
      for (const std::string& a : m.comm_addresses) addresses.push_back(Address::parse(a));
    } catch (const InvalidArgumentError& e) {
      return invalid("add_remote: agent '" + m.name + "' lists a bad Comm address: " + e.what());
    }
    Peer wanted = Peer::at(m.comm_node, std::move(addresses));
    Comm& comm = *config_.comm;
    try {
      const std::vector<Address> have = comm.peer(m.comm_node).endpoints();
      for (const Address& a : wanted.endpoints())
        if (std::find(have.begin(), have.end(), a) != have.end()) return Ok{};
      const auto stats = comm.stats().peers;
      if (auto it = stats.find(m.comm_node); it != stats.end() && it->second.connected) return Ok{};
      comm.remove_peer(m.comm_node, "agent '" + m.name + "' now listens at " + wanted.endpoints_text());
    } catch (const std::out_of_range&) {
    }
    try {
      comm.add_peer(std::move(wanted));
    } catch (const InvalidArgumentError& e) {
      try {
        (void)comm.peer(m.comm_node);  // it joined meanwhile
        return Ok{};
      } catch (const std::out_of_range&) {
      }
      return invalid("add_remote: cannot reach agent '" + m.name + "': " + e.what());
    } catch (const ClosedError& e) {
      return Error{ErrorCode::kClosed, std::string("add_remote: ") + e.what()};
    }
    return Ok{};
  }

  std::vector<BackendKind> candidates() const {
    if (config_.backend != BackendKind::kAuto) return {config_.backend};
    return {BackendKind::kCma, BackendKind::kUcx, BackendKind::kTcp};
  }

  static bool inside(const DescList& regions, const Desc& d) {
    if (d.addr + d.len < d.addr) return false;
    for (const Desc& r : regions)
      if (d.addr >= r.addr && d.addr + d.len <= r.addr + r.len) return true;
    return false;
  }

  // Under mu_.
  Status apply(const RegionChange& change) {
    for (const auto& [k, b] : backends_)
      for (const Range& r : change.removed) b->remove_region(r);
    for (const auto& [k, b] : backends_)
      for (const Range& r : change.added)
        if (Status s = b->add_region(r); !s) return s;
    return Ok{};
  }

  void release_allocation(void* p, std::size_t len, BackendKind owner) {
    if (owner == BackendKind::kUcx) backends_.at(BackendKind::kUcx)->release_allocation(p);
    else ::munmap(p, len);
  }

  std::shared_ptr<Transfer> find(XferHandle handle) {
    std::lock_guard lock(transfers_mu_);
    auto it = transfers_.find(handle.id);
    return it == transfers_.end() ? nullptr : it->second;
  }

  // Backend threads. The agent is not destroyed while this runs (Outcomes' gate); what the
  // notification's send needs is copied out of it first, its callback holds only Outcomes.
  void on_backend_done(const std::shared_ptr<Transfer>& t, Status s) {
    std::shared_ptr<NotifyChannel> notify;
    std::string from;
    {
      std::shared_lock publishing(outcomes_->gate);
      if (outcomes_->closed) return;
      if (!s) return outcomes_->publish_locked(*t, XferState::kError, s.error().message);
      if (t->notification.empty() || !notify_) return outcomes_->publish_locked(*t, XferState::kDone);
      notify = notify_;
      from = config_.name;
    }
    notify->send(t->peer->meta.comm_node, from, t->notification, [outcomes = outcomes_, t](Status sent) {
      if (sent) outcomes->publish(*t, XferState::kDone);
      else outcomes->publish(*t, XferState::kError, "the bytes arrived but the notification could not be sent: " + sent.error().message);
    });
  }

  AgentConfig config_;
  const std::uint64_t generation_;
  std::map<BackendKind, std::unique_ptr<Backend>> backends_;
  std::shared_ptr<NotifyChannel> notify_;

  mutable std::mutex mu_;  // cache_, remotes_, newest_generation_
  RegistrationCache cache_;
  std::unordered_map<std::string, std::shared_ptr<RemoteAgent>> remotes_;
  std::unordered_map<std::string, std::uint64_t> newest_generation_;
  std::map<void*, std::pair<std::size_t, BackendKind>> allocations_;  // allocate_memory's

  std::mutex transfers_mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Transfer>> transfers_;
  std::atomic<std::uint64_t> next_id_{1};
  const std::shared_ptr<Outcomes> outcomes_ = std::make_shared<Outcomes>();
};

}  // namespace

const char* backend_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kCma: return "cma";
    case BackendKind::kUcx: return "ucx";
    case BackendKind::kTcp: return "tcp";
  }
  return "?";
}

BackendKind parse_backend(const std::string& text) {
  for (BackendKind k : {BackendKind::kAuto, BackendKind::kCma, BackendKind::kUcx, BackendKind::kTcp})
    if (text == backend_name(k)) return k;
  throw InvalidArgumentError("unknown transfer backend '" + text + "' (auto, cma, ucx or tcp)");
}

const char* xfer_state_name(XferState state) {
  switch (state) {
    case XferState::kPending: return "pending";
    case XferState::kDone: return "done";
    case XferState::kError: return "error";
  }
  return "?";
}

std::unique_ptr<Agent> Agent::create(AgentConfig config) {
  if (config.name.empty()) throw InvalidArgumentError("AgentConfig.name is empty (agents are told apart by name)");
  if (config.chunk_bytes == 0) throw InvalidArgumentError("AgentConfig.chunk_bytes is 0");
  if (config.default_timeout <= std::chrono::duration<double>::zero())
    throw InvalidArgumentError("AgentConfig.default_timeout must be positive");
  auto agent = std::make_unique<AgentImpl>(config);
  if (config.backend != BackendKind::kAuto) {
    const Capabilities c = agent->capabilities(config.backend);
    if (!c.available)
      throw InvalidArgumentError(std::string("transfer backend ") + backend_name(config.backend) + " is not available: " + c.reason);
  }
  return agent;
}

}  // namespace wcomm::xfer
