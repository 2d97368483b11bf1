// The ucx backend: UCP RMA. Each region is mapped (ucp_mem_map) and its rkey packed into the
// metadata; a peer unpacks the rkeys on an endpoint to its worker address and posts
// ucp_put_nbx / ucp_get_nbx, then ucp_ep_flush_nbx: the flush completing means the bytes are
// in place remotely. One progress thread drives the worker (sleeping on its event fd when
// idle: over UCX's tcp transport the target must progress for RMA to complete).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include <ucp/api/ucp.h>

#include "transfer/backend.h"
#include "ucx/progress_loop.h"
#include "ucx/ucp_worker.h"

namespace wcomm::xfer {

namespace {

constexpr auto kPollAfterWork = std::chrono::microseconds(500);

std::string ucs_text(ucs_status_t s) { return ucp::status_text(s); }

struct UcxRemote {
  ucp_ep_h ep = nullptr;
  std::vector<std::pair<Desc, ucp_rkey_h>> rkeys;  // per remote region
  std::atomic<bool> failed{false};
  std::string error;  // set before failed
  // A transfer to it failed or was abandoned: the peer may be dead. UCX's shared-memory
  // transports cannot tell, and destroying such a peer's rkeys crashed inside UCX 1.13 after
  // the peer was killed, so a suspect remote's rkeys are left for ucp_worker_destroy.
  std::atomic<bool> suspect{false};
};

// Where finish_wireup's one-byte reads land; nobody reads it. Not on the stack or in a
// UcxRemote: a read that timed out may still land later, after both are gone. Written only
// by UCX under worker_mu_.
std::uint8_t wireup_probe_sink = 0;

// One transfer's outstanding UCX requests: done when the flush completes.
class UcxBackend;
struct UcxOp {
  std::shared_ptr<Transfer> transfer;
  UcxBackend* backend = nullptr;
  UcxRemote* remote = nullptr;  // kept alive by transfer->peer
  std::atomic<int> outstanding{0};
  std::mutex mu;
  std::string error;
};

class UcxBackend final : public Backend {
 public:
  UcxBackend(const AgentConfig& config, CompletionFn done) : done_(std::move(done)) {
    caps_.kind = BackendKind::kUcx;
    ucx_ = std::make_unique<ucp::UcpWorker>(UCP_FEATURE_RMA);
    if (!ucx_->ok()) { unavailable(ucx_->error()); return; }
    context_ = ucx_->context();
    worker_ = ucx_->worker();
    address_ = ucx_->address();
    // Over UCX's tcp transport the target must progress too for RMA to complete: the loop
    // does, sleeping on the worker's event fd when idle.
    loop_.emplace(*ucx_, "wcomm-xfer-ucx", kPollAfterWork, [this] { return round(); }, [this] {
      std::lock_guard lock(worker_mu_);
      return ucp_worker_arm(worker_);
    });
    caps_.available = caps_.write = caps_.read = true;
    loop_->start();
  }

  ~UcxBackend() override {
    if (loop_) loop_->stop();
    std::lock_guard lock(worker_mu_);
    for (auto& [begin, m] : regions_)
      if (m.owned) ucp_mem_unmap(context_, m.memh);
    for (auto& [p, a] : allocated_) ucp_mem_unmap(context_, a.first);
    ucx_.reset();  // drains wire-up in flight, then destroys the worker and context
  }

  Capabilities capabilities() const override { return caps_; }

  void cancel(Transfer& t) override {
    if (auto remote = std::static_pointer_cast<UcxRemote>(t.peer->backend_state)) remote->suspect.store(true);
  }

  void* allocate(std::size_t len) override {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = nullptr;
    mp.length = len;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    std::lock_guard lock(worker_mu_);
    ucp_mem_h memh = nullptr;
    if (ucp_mem_map(context_, &mp, &memh) != UCS_OK) return nullptr;
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    if (ucp_mem_query(memh, &attr) != UCS_OK) {
      ucp_mem_unmap(context_, memh);
      return nullptr;
    }
    allocated_[attr.address] = {memh, len};
    return attr.address;
  }

  void release_allocation(void* p) override {
    std::lock_guard lock(worker_mu_);
    auto it = allocated_.find(p);
    if (it == allocated_.end()) return;
    ucp_mem_unmap(context_, it->second.first);
    allocated_.erase(it);
  }

  Status add_region(const Range& r) override {
    if (!caps_.available) return Ok{};
    {
      // A region that is exactly memory UCX allocated reuses that mapping (its rkey lets a
      // same-host peer map it).
      std::lock_guard lock(worker_mu_);
      auto a = allocated_.find(reinterpret_cast<void*>(r.begin));
      if (a != allocated_.end() && a->second.second == r.end - r.begin) {
        Mapped m;
        m.memh = a->second.first;
        m.owned = false;
        void* buf = nullptr;
        std::size_t len = 0;
        if (ucp_rkey_pack(context_, m.memh, &buf, &len) != UCS_OK)
          return Error{ErrorCode::kInvalidArgument, "ucx: ucp_rkey_pack failed"};
        m.rkey.assign(static_cast<const char*>(buf), len);
        ucp_rkey_buffer_release(buf);
        regions_[r.begin] = std::move(m);
        return Ok{};
      }
    }
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = reinterpret_cast<void*>(r.begin);
    mp.length = r.end - r.begin;
    std::lock_guard lock(worker_mu_);
    Mapped m;
    ucs_status_t s = ucp_mem_map(context_, &mp, &m.memh);
    if (s != UCS_OK) return Error{ErrorCode::kInvalidArgument, "ucx: ucp_mem_map: " + ucs_text(s)};
    void* buf = nullptr;
    std::size_t len = 0;
    s = ucp_rkey_pack(context_, m.memh, &buf, &len);
    if (s != UCS_OK) {
      ucp_mem_unmap(context_, m.memh);
      return Error{ErrorCode::kInvalidArgument, "ucx: ucp_rkey_pack: " + ucs_text(s)};
    }
    m.rkey.assign(static_cast<const char*>(buf), len);
    ucp_rkey_buffer_release(buf);
    regions_[r.begin] = std::move(m);
    return Ok{};
  }

  void remove_region(const Range& r) override {
    std::lock_guard lock(worker_mu_);
    auto it = regions_.find(r.begin);
    if (it == regions_.end()) return;
    if (it->second.owned) ucp_mem_unmap(context_, it->second.memh);
    regions_.erase(it);
  }

  void export_metadata(AgentMetadata& m) const override {
    if (!caps_.available) return;
    std::lock_guard lock(worker_mu_);
    m.ucx_address = address_;
    for (const Desc& d : m.regions) {
      auto it = regions_.find(d.addr);
      m.ucx_rkeys.push_back(it == regions_.end() ? std::string() : it->second.rkey);
    }
  }

  Status connect(RemoteAgent& remote) override {
    if (!caps_.available) return Error{ErrorCode::kInvalidArgument, "ucx: " + caps_.reason};
    if (remote.meta.ucx_address.empty())
      return Error{ErrorCode::kInvalidArgument, "ucx: agent '" + remote.meta.name + "' offers no ucx address"};
    auto state = std::shared_ptr<UcxRemote>(new UcxRemote(), [this](UcxRemote* r) { destroy(r); });
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(remote.meta.ucx_address.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails our requests instead of hanging them
    ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
      auto* r = static_cast<UcxRemote*>(arg);
      r->error = "ucx: the endpoint failed: " + ucs_text(status);
      r->failed.store(true, std::memory_order_release);
    };
    ep.err_handler.arg = state.get();
    std::lock_guard lock(worker_mu_);
    ucs_status_t s = ucp_ep_create(worker_, &ep, &state->ep);
    if (s == UCS_ERR_UNREACHABLE) {
      // UCX's shared-memory transports cannot detect a dead peer, so with PEER mode nothing
      // reaches it; without it, a dead peer is caught by the transfer's timeout instead.
      ep.field_mask &= ~(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
      s = ucp_ep_create(worker_, &ep, &state->ep);
    }
    if (s != UCS_OK) {
      state->ep = nullptr;
      return Error{ErrorCode::kConnectionFailed, "ucx: ucp_ep_create to agent '" + remote.meta.name + "': " + ucs_text(s)};
    }
    for (std::size_t i = 0; i < remote.meta.regions.size(); ++i) {
      if (i >= remote.meta.ucx_rkeys.size() || remote.meta.ucx_rkeys[i].empty()) continue;
      ucp_rkey_h rkey = nullptr;
      s = ucp_ep_rkey_unpack(state->ep, remote.meta.ucx_rkeys[i].data(), &rkey);
      if (s != UCS_OK) return Error{ErrorCode::kInvalidArgument, "ucx: ucp_ep_rkey_unpack for agent '" + remote.meta.name + "': " + ucs_text(s)};
      state->rkeys.emplace_back(remote.meta.regions[i], rkey);
    }
    if (Status wired = finish_wireup(*state, remote.meta.name); !wired.ok()) return wired;
    remote.backend_state = state;
    return Ok{};
  }

  // Under worker_mu_: completes a new endpoint's wireup with the remote's worker before any
  // transfer starts. UCX 1.13 aborts a process whose worker still holds a wireup reply when
  // the remote dies ("got REP message", openucx/ucx#8175, fixed after 1.13): with the wireup
  // done first, a remote that dies while our transfers are in flight only fails them.
  // Bounded: a remote that does not answer fails the connect.
  Status finish_wireup(UcxRemote& state, const std::string& name) {
    ucp_request_param_t p{};
    // A one-byte read of the remote's memory needs the remote's answer, so its side of the
    // connection is up too; with no region to read, a flush.
    ucs_status_ptr_t req = state.rkeys.empty() ? ucp_ep_flush_nbx(state.ep, &p)
                                               : ucp_get_nbx(state.ep, &wireup_probe_sink, 1, state.rkeys.front().first.addr,
                                                             state.rkeys.front().second, &p);
    ucs_status_t s = UCS_OK;
    if (UCS_PTR_IS_ERR(req)) {
      s = UCS_PTR_STATUS(req);
    } else if (req != nullptr) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
        ucp_worker_progress(worker_);
      ucp_request_free(req);  // a request still in progress is released when it completes
    }
    if (s == UCS_OK) return Ok{};
    // A read still in flight keeps using the endpoint and the rkey: leave both to
    // ucp_worker_destroy, as for any remote that may be dead.
    if (s == UCS_INPROGRESS) state.suspect.store(true);
    const std::string why = s == UCS_INPROGRESS ? "no answer within 10 s" : ucs_text(s);
    return Error{ErrorCode::kConnectionFailed, "ucx: connecting to agent '" + name + "': " + why};
  }

  void start(const std::shared_ptr<Transfer>& t) override {
    auto remote = std::static_pointer_cast<UcxRemote>(t->peer->backend_state);
    if (remote->failed.load(std::memory_order_acquire)) return done_(t, Error{ErrorCode::kConnectionClosed, remote->error});
    auto* op = new UcxOp();
    op->transfer = t;
    op->backend = this;
    op->remote = remote.get();
    in_flight_.fetch_add(1);
    op->outstanding = 1;  // the flush
    std::unique_lock lock(worker_mu_);
    for (std::size_t i = 0; i < t->local.size(); ++i) {
      const Desc& l = t->local[i];
      const Desc& r = t->remote[i];
      ucp_rkey_h rkey = nullptr;
      for (const auto& [region, k] : remote->rkeys)
        if (r.addr >= region.addr && r.addr + r.len <= region.addr + region.len) rkey = k;
      if (!rkey) {
        fail_op(op, "ucx: no rkey for remote descriptor " + std::to_string(i) + " (the peer's metadata has none for that region)");
        break;
      }
      ucp_request_param_t p = param(op);
      op->outstanding.fetch_add(1);
      ucs_status_ptr_t req = t->op == Op::kWrite
                                 ? ucp_put_nbx(remote->ep, reinterpret_cast<void*>(l.addr), l.len, r.addr, rkey, &p)
                                 : ucp_get_nbx(remote->ep, reinterpret_cast<void*>(l.addr), l.len, r.addr, rkey, &p);
      if (!UCS_PTR_IS_PTR(req)) {  // completed (or failed) at once: no callback comes
        op->outstanding.fetch_sub(1);
        if (UCS_PTR_IS_ERR(req)) {
          fail_op(op, "ucx: " + std::string(t->op == Op::kWrite ? "ucp_put_nbx" : "ucp_get_nbx") + ": " + ucs_text(UCS_PTR_STATUS(req)));
          break;
        }
      }
    }
    ucp_request_param_t p = param(op);
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(remote->ep, &p);
    if (!UCS_PTR_IS_PTR(flush)) {
      if (UCS_PTR_IS_ERR(flush)) fail_op(op, "ucx: ucp_ep_flush_nbx: " + ucs_text(UCS_PTR_STATUS(flush)));
      op_done(op);
    }
    lock.unlock();
    run_completions();
    wake();
  }

 private:
  struct Mapped {
    ucp_mem_h memh = nullptr;
    std::string rkey;
    bool owned = true;  // false: the mapping belongs to allocated_
  };

  void unavailable(std::string why) { caps_.reason = std::move(why); }

  static ucp_request_param_t param(UcxOp* op) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = [](void* request, ucs_status_t status, void* user) {
      auto* o = static_cast<UcxOp*>(user);
      if (status != UCS_OK) fail_op(o, "ucx: a request failed: " + ucs_text(status));
      ucp_request_free(request);
      op_done(o);
    };
    p.user_data = op;
    return p;
  }

  static void fail_op(UcxOp* op, std::string why) {
    std::lock_guard lock(op->mu);
    if (op->error.empty()) op->error = std::move(why);
  }

  // One outstanding request finished; the last one completes the transfer.
  static void op_done(UcxOp* op) {
    if (op->outstanding.fetch_sub(1) != 1) return;
    std::string error;
    {
      std::lock_guard lock(op->mu);
      error = op->error;
    }
    UcxBackend* self = op->backend;
    if (!error.empty()) op->remote->suspect.store(true);
    std::shared_ptr<Transfer> t = std::move(op->transfer);
    delete op;
    self->in_flight_.fetch_sub(1);
    // Reported later, with worker_mu_ released: dropping the transfer may drop the last
    // reference to its remote, whose clean-up takes worker_mu_.
    std::lock_guard lock(self->completed_mu_);
    self->completed_.emplace_back(std::move(t), error.empty() ? Status(Ok{}) : Status(Error{ErrorCode::kConnectionClosed, error}));
  }

  void run_completions() {
    std::vector<std::pair<std::shared_ptr<Transfer>, Status>> batch;
    {
      std::lock_guard lock(completed_mu_);
      batch.swap(completed_);
    }
    for (auto& [t, s] : batch) done_(t, std::move(s));
  }

  void destroy(UcxRemote* r) {
    {
      std::lock_guard lock(worker_mu_);
      if (r->suspect.load()) {
        delete r;
        return;
      }
      for (auto& [region, rkey] : r->rkeys) ucp_rkey_destroy(rkey);
      if (r->ep) {
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        // A flushing close lets a wireup still in flight finish (a forced close during it
        // tripped a UCX 1.13 assertion, "got REP message", in the peer's worker); a failed
        // endpoint is forced closed.
        p.flags = r->failed.load(std::memory_order_acquire) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        ucs_status_ptr_t req = ucp_ep_close_nbx(r->ep, &p);
        if (UCS_PTR_IS_PTR(req)) {
          // Completes after a little progress; bounded so a wedged peer cannot hang us.
          for (int i = 0; i < 100000 && ucp_request_check_status(req) == UCS_INPROGRESS; ++i) ucp_worker_progress(worker_);
          ucp_request_free(req);
        }
      }
    }
    delete r;
  }

  void wake() { loop_->wake(); }

  // One round of the progress loop: while transfers are in flight it keeps progressing
  // (operations posted need progress without any fd event); idle, it sleeps until woken.
  ucp::ProgressLoop::Round round() {
    unsigned progressed = 0;
    {
      std::lock_guard lock(worker_mu_);
      progressed = ucp_worker_progress(worker_);
    }
    run_completions();
    return {progressed > 0 || in_flight_hint(), ucp::ProgressLoop::kUntilWoken};
  }

  // While transfers are in flight the thread keeps progressing instead of sleeping.
  bool in_flight_hint() const { return in_flight_.load(std::memory_order_relaxed) > 0; }

  CompletionFn done_;
  Capabilities caps_;
  mutable std::mutex worker_mu_;
  std::unique_ptr<ucp::UcpWorker> ucx_;  // context_ and worker_ are its
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  std::map<std::uint64_t, Mapped> regions_;
  std::map<void*, std::pair<ucp_mem_h, std::size_t>> allocated_;  // allocate()'s
  std::atomic<int> in_flight_{0};
  std::mutex completed_mu_;
  std::vector<std::pair<std::shared_ptr<Transfer>, Status>> completed_;
  std::optional<ucp::ProgressLoop> loop_;  // last: it stops before what its rounds touch goes
};

}  // namespace

std::unique_ptr<Backend> make_ucx_backend(const AgentConfig& config, CompletionFn done) {
  return std::make_unique<UcxBackend>(config, std::move(done));
}

}  // namespace wcomm::xfer
