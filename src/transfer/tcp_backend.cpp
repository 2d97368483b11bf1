// The tcp backend: the fallback that needs nothing but the agents' Comm. A WRITE is a header
// then the bytes (copied by the target into its registered memory);
// a READ is a header, answered by an ack and the bytes (copied into the initiator's memory).
// Each side handles one request per peer at a time, so per-peer FIFO order pairs headers
// with their bytes.
#include <cstring>
#include <map>
#include <mutex>

#include "core/dict_fields.h"
#include "transfer/backend.h"
#include "transfer/peer_follower.h"
#include "wcomm/comm.h"

namespace wcomm::xfer {

namespace {

constexpr std::uint32_t kRequestTag = kFirstReservedTag + 1;
constexpr std::uint32_t kWriteDataTag = kFirstReservedTag + 2;
constexpr std::uint32_t kAckTag = kFirstReservedTag + 3;
constexpr std::uint32_t kReadDataTag = kFirstReservedTag + 4;

std::vector<Tensor> tensors_over(const DescList& descs) {
  std::vector<Tensor> out;
  out.reserve(descs.size());
  for (const Desc& d : descs)
    out.push_back(Tensor::borrow(reinterpret_cast<const void*>(d.addr), DType::kUInt8, {static_cast<std::int64_t>(d.len)}));
  return out;
}

Value list_of(std::vector<Tensor> tensors) {
  List l;
  for (Tensor& t : tensors) l.items.emplace_back(std::move(t));
  return l;
}

// The header's op: "write" or "read", anything else refused.
Result<bool> is_write(const Dict& header) {
  Result<std::string> op = fields::string(header, "op");
  if (!op.ok()) return op.error();
  if (op.value() != "write" && op.value() != "read")
    return Error{ErrorCode::kProtocol, "field 'op' is '" + op.value() + "', not 'write' or 'read'"};
  return op.value() == "write";
}

// An ack: ok, then the refusal's reason or whether a READ's bytes follow.
struct Ack {
  bool ok = false;
  std::string reason;
  bool follows = false;
};

Result<Ack> read_ack(const Dict& d) {
  Ack ack;
  Result<bool> ok = fields::boolean(d, "ok");
  if (!ok.ok()) return ok.error();
  ack.ok = ok.value();
  Result<std::string> reason = fields::string_or_bytes(d, "reason");
  Result<bool> follows = fields::boolean(d, "follows");
  if (!ack.ok && !reason.ok()) return reason.error();  // each of these matters on one side only
  if (ack.ok && !follows.ok()) return follows.error();
  if (reason.ok()) ack.reason = std::move(reason).value();
  ack.follows = follows.ok() && follows.value();
  return ack;
}

// Copies a received list of byte tensors into the descriptors' memory. (Comm::recv_into
// would read them straight in, but a recv_into posted while its frame is already being read
// completes without the bytes: docs/transfer.md, "Known issues". One copy until Comm is fixed.)
std::string copy_into(const Value& v, const DescList& descs) {
  const List* l = v.get_if<List>();
  if (!l || l->items.size() != descs.size()) return "the bytes did not come as one tensor per descriptor";
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const Tensor* t = l->items[i].get_if<Tensor>();
    if (!t || t->nbytes() != descs[i].len) return "tensor " + std::to_string(i) + " does not match its descriptor's length";
    std::memcpy(reinterpret_cast<void*>(descs[i].addr), t->data(), t->nbytes());
  }
  return {};
}

// Futures a pending transfer is waiting on, so release() can cancel them.
struct TcpState {
  std::mutex mu;
  std::vector<Future<SendResult>> sends;
  Future<Received> data;
};

class TcpBackend final : public Backend, public std::enable_shared_from_this<TcpBackend> {
 public:
  TcpBackend(const AgentConfig& config, std::uint64_t generation, CompletionFn done, FindLocalFn find_local)
      : comm_(config.comm), generation_(generation), done_(std::move(done)), find_local_(std::move(find_local)) {
    caps_.kind = BackendKind::kTcp;
    if (!comm_) {
      caps_.reason = "the tcp backend moves bytes over the agent's Comm, and AgentConfig.comm is not set";
      return;
    }
    caps_.available = caps_.write = caps_.read = true;
  }

  // One request loop and one ack loop per peer, joined ones too.
  void start_loops() {
    if (!comm_) return;
    follower_ = PeerFollower::start(comm_, [weak = weak_from_this()](const Peer& p) {
      if (auto self = weak.lock()) {
        self->arm_requests(p);
        self->arm_acks(p);
      }
    });
  }

  void stop() {
    if (follower_) follower_->stop();
    std::vector<Future<Received>> loops;
    std::map<std::uint64_t, std::shared_ptr<Transfer>> pending;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      loops = std::move(loops_);
      pending = std::move(pending_);
    }
    for (auto& f : loops) f.cancel();
    for (auto& [id, t] : pending) done_(t, Error{ErrorCode::kClosed, "the agent was closed"});
  }

  Capabilities capabilities() const override { return caps_; }

  Status connect(RemoteAgent& remote) override {
    if (!caps_.available) return Error{ErrorCode::kInvalidArgument, "tcp: " + caps_.reason};
    if (remote.meta.comm_node.empty())
      return Error{ErrorCode::kInvalidArgument, "tcp: agent '" + remote.meta.name + "' has no Comm"};
    try {
      (void)comm_->peer(remote.meta.comm_node);
    } catch (const std::out_of_range&) {
      return Error{ErrorCode::kInvalidArgument, "tcp: agent '" + remote.meta.name + "' is node '" + remote.meta.comm_node +
                                                    "', which is not a peer of this agent's Comm"};
    }
    return Ok{};
  }

  void start(const std::shared_ptr<Transfer>& t) override {
    auto state = std::make_shared<TcpState>();
    t->backend_state = state;
    const Peer& peer = comm_->peer(t->peer->meta.comm_node);
    Dict header{{"op", t->op == Op::kWrite ? "write" : "read"}, {"id", t->id},
                {"to_generation", t->peer->meta.generation},
                {"descs", Bytes(encode_descs(t->remote))}};
    std::lock_guard lock(mu_);  // header and bytes go out back to back, in the same order for all
    pending_[t->id] = t;
    std::weak_ptr<TcpBackend> weak = weak_from_this();
    auto on_sent = [weak, t](Result<SendResult> r) {
      auto self = weak.lock();
      if (self && !r) self->complete(t->id, Error{r.error().code, "tcp: sending to agent '" + t->peer->meta.name + "' failed: " + r.error().message});
    };
    std::lock_guard state_lock(state->mu);
    state->sends.push_back(comm_->send(std::move(header), peer, {}, {.tag = kRequestTag}));
    state->sends.back().then(on_sent);
    if (t->op == Op::kWrite) {
      state->sends.push_back(comm_->send(list_of(tensors_over(t->local)), peer, {}, {.tag = kWriteDataTag}));
      state->sends.back().then(on_sent);
    }
  }

  void cancel(Transfer& t) override {
    auto state = std::static_pointer_cast<TcpState>(t.backend_state);
    if (!state) return;
    {
      std::lock_guard lock(mu_);
      pending_.erase(t.id);
    }
    std::lock_guard lock(state->mu);
    for (auto& f : state->sends) f.cancel();
    if (state->data.valid()) state->data.cancel();
  }

 private:
  std::shared_ptr<Transfer> take_pending(std::uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return nullptr;
    std::shared_ptr<Transfer> t = std::move(it->second);
    pending_.erase(it);
    return t;
  }

  void complete(std::uint64_t id, Status s) {
    std::shared_ptr<Transfer> t;
    {
      std::lock_guard lock(mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      t = std::move(it->second);
      pending_.erase(it);
    }
    done_(t, std::move(s));
  }

  // Target side: one request per peer at a time (its bytes follow on the data tag).
  void arm_requests(const Peer& peer) {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    Future<Received> f = comm_->recv(peer, {.tag = kRequestTag});
    std::weak_ptr<TcpBackend> weak = weak_from_this();
    f.then([weak, peer](Result<Received> got) {
      auto self = weak.lock();
      if (!self) return;
      if (!got) {
        if (got.error().code != ErrorCode::kClosed && got.error().code != ErrorCode::kCancelled) self->arm_requests(peer);
        return;
      }
      self->serve(peer, got.value().value);
    });
    loops_.push_back(std::move(f));
    std::erase_if(loops_, [](const Future<Received>& x) { return x.ready(); });
  }

  // Why a request is not acceptable ("" when it is): malformed, stale, or outside our memory.
  std::string check(const Dict& header, DescList& descs) {
    Result<std::uint64_t> generation = fields::uint64(header, "to_generation");
    if (!generation.ok()) return "malformed request: " + generation.error().message;
    if (generation.value() != generation_)
      return "stale metadata: the request was for generation " + std::to_string(generation.value()) +
             " of this agent, which is generation " + std::to_string(generation_) + " (it restarted)";
    Result<std::string> encoded = fields::string_or_bytes(header, "descs");
    if (!encoded.ok()) return "malformed request: " + encoded.error().message;
    Result<DescList> d = decode_descs(encoded.value());
    if (!d) return d.error().message;
    descs = std::move(d).value();
    for (const Desc& x : descs)
      if (x.dev_id != 0 || x.addr + x.len < x.addr || !find_local_(x.addr, x.addr + x.len))
        return "a descriptor is not inside this agent's registered memory";
    return {};
  }

  void serve(const Peer& peer, const Value& v) {
    const Dict* header = v.get_if<Dict>();
    if (!header) return arm_requests(peer);
    // Without a readable id there is no one to answer: the request is refused unanswered (a
    // write's bytes are still taken off their tag) and its transfer ends by timeout or cancel.
    const Result<std::uint64_t> id = fields::uint64(*header, "id");
    // An unreadable op is refused as a read: no bytes are expected for it.
    const Result<bool> op_is_write = is_write(*header);
    const bool write = op_is_write.ok() && op_is_write.value();
    DescList descs;
    std::string problem;
    if (!id.ok()) problem = "malformed request: " + id.error().message;
    else if (!op_is_write.ok()) problem = "malformed request: " + op_is_write.error().message;
    else problem = check(*header, descs);
    std::weak_ptr<TcpBackend> weak = weak_from_this();
    auto ack = [this, peer, id](bool ok, const std::string& reason, bool follows) {
      if (!id.ok()) return;
      (void)comm_->send(Dict{{"id", id.value()}, {"ok", ok}, {"reason", reason}, {"follows", follows}}, peer, {},
                        {.tag = kAckTag});
    };
    if (write) {
      // The bytes come next on the data tag: straight into our memory, or read and dropped.
      Future<Received> data = comm_->recv(peer, {.tag = kWriteDataTag});
      data.then([weak, peer, ack, problem, descs](Result<Received> got) {
        auto self = weak.lock();
        if (!self) return;
        std::string why = problem;
        if (why.empty() && !got) why = "receiving the bytes failed: " + got.error().message;
        if (why.empty()) why = copy_into(got.value().value, descs);
        // Re-armed before the ack: whatever the initiator sends once it has the ack is
        // delivered here after this recv was registered (both under the Comm's receive lock
        // for this peer), so a thread of this process that reads the landed bytes after such
        // a message is ordered after the copy, for ThreadSanitizer too (the ack's round trip
        // through the other process is invisible to it).
        self->arm_requests(peer);
        ack(why.empty(), why, false);
      });
      std::lock_guard lock(mu_);
      loops_.push_back(std::move(data));
      return;
    }
    if (!problem.empty()) {
      ack(false, problem, false);
    } else {
      ack(true, "", true);
      (void)comm_->send(list_of(tensors_over(descs)), peer, {}, {.tag = kReadDataTag});
    }
    arm_requests(peer);
  }

  // Initiator side: acks one at a time per peer (a READ's bytes follow its ack).
  void arm_acks(const Peer& peer) {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    Future<Received> f = comm_->recv(peer, {.tag = kAckTag});
    std::weak_ptr<TcpBackend> weak = weak_from_this();
    f.then([weak, peer](Result<Received> got) {
      auto self = weak.lock();
      if (!self) return;
      if (!got) {
        if (got.error().code != ErrorCode::kClosed && got.error().code != ErrorCode::kCancelled) self->arm_acks(peer);
        return;
      }
      self->on_ack(peer, got.value().value);
    });
    loops_.push_back(std::move(f));
  }

  void on_ack(const Peer& peer, const Value& v) {
    const Dict* d = v.get_if<Dict>();
    if (!d) return arm_acks(peer);
    // An ack without a readable id belongs to no transfer we could name: dropped.
    const Result<std::uint64_t> read_id = fields::uint64(*d, "id");
    if (!read_id.ok()) return arm_acks(peer);
    const std::uint64_t id = read_id.value();
    const Result<Ack> ack = read_ack(*d);
    if (!ack.ok()) {
      complete(id, Error{ErrorCode::kProtocol, "tcp: a malformed ack from node '" + peer.node_id + "': " + ack.error().message});
      return arm_acks(peer);
    }
    if (!ack.value().ok) {
      complete(id, Error{ErrorCode::kInvalidArgument, "tcp: the remote agent refused: " + ack.value().reason});
      return arm_acks(peer);
    }
    if (!ack.value().follows) {
      complete(id, Ok{});
      return arm_acks(peer);
    }
    std::shared_ptr<Transfer> t;
    {
      std::lock_guard lock(mu_);
      auto it = pending_.find(id);
      if (it != pending_.end()) t = it->second;
    }
    Future<Received> data = comm_->recv(peer, {.tag = kReadDataTag});
    if (t) {
      auto state = std::static_pointer_cast<TcpState>(t->backend_state);
      std::lock_guard lock(state->mu);
      state->data = data;
    }
    std::weak_ptr<TcpBackend> weak = weak_from_this();
    data.then([weak, peer, id](Result<Received> got) {
      auto self = weak.lock();
      if (!self) return;
      if (!got) {
        self->complete(id, Error{got.error().code, "tcp: receiving the bytes failed: " + got.error().message});
      } else {
        // Copied into the transfer's memory only while it is still pending and unreleased
        // (a released transfer's memory may be gone: its bytes are dropped).
        std::shared_ptr<Transfer> t = self->take_pending(id);
        if (t) {
          std::string why;
          {
            t->active_steps.fetch_add(1);
            if (!t->cancelled.load()) why = copy_into(got.value().value, t->local);
            t->active_steps.fetch_sub(1);
          }
          self->done_(t, why.empty() ? Status(Ok{}) : Status(Error{ErrorCode::kProtocol, "tcp: " + why}));
        }
      }
      self->arm_acks(peer);
    });
  }

  std::shared_ptr<Comm> comm_;
  std::uint64_t generation_;
  CompletionFn done_;
  FindLocalFn find_local_;
  Capabilities caps_;
  std::mutex mu_;
  bool stopping_ = false;
  std::map<std::uint64_t, std::shared_ptr<Transfer>> pending_;
  std::vector<Future<Received>> loops_;
  std::shared_ptr<PeerFollower> follower_;  // set once by start_loops
};

// Owns the shared backend so its callbacks can hold weak references to it.
class TcpBackendHandle final : public Backend {
 public:
  explicit TcpBackendHandle(std::shared_ptr<TcpBackend> b) : b_(std::move(b)) { b_->start_loops(); }
  ~TcpBackendHandle() override { b_->stop(); }
  Capabilities capabilities() const override { return b_->capabilities(); }
  Status connect(RemoteAgent& r) override { return b_->connect(r); }
  void start(const std::shared_ptr<Transfer>& t) override { b_->start(t); }
  void cancel(Transfer& t) override { b_->cancel(t); }

 private:
  std::shared_ptr<TcpBackend> b_;
};

}  // namespace

std::unique_ptr<Backend> make_tcp_backend(const AgentConfig& config, std::uint64_t generation, CompletionFn done,
                                          FindLocalFn find_local) {
  return std::make_unique<TcpBackendHandle>(std::make_shared<TcpBackend>(config, generation, std::move(done), std::move(find_local)));
}

}  // namespace wcomm::xfer
