// Group: construction (over a Comm or from a rendezvous), the abort listeners that make one
// rank's failure every rank's, and the public calls, which check their arguments and pick an
// algorithm (algorithms.h).
#include "wcomm/collectives/group.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "collectives/algorithms.h"

namespace wcomm {
namespace {

constexpr std::array<std::string_view, 3> kAlgorithmNames = {"auto", "ring", "recursive_doubling"};

std::string node_id(int rank) { return "rank-" + std::to_string(rank); }

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " x " + std::to_string(t.numel());
}

void check_rank(int rank, int world, const std::string& what) {
  if (rank < 0 || rank >= world)
    throw InvalidArgumentError(what + ": rank " + std::to_string(rank) + " is outside the world (0.." +
                               std::to_string(world - 1) + ")");
}

void check_reducible(const Tensor& t, const std::string& what) {
  if (!reducible(t.dtype())) reduce_into(nullptr, nullptr, 0, t.dtype(), ReduceOp::kSum);  // throws, naming it
}

// A TCP port held (bound, not listening, SO_REUSEADDR) until the Comm binds it too, so nothing
// else takes it between the rendezvous and Comm::create.
class PortReservation {
 public:
  explicit PortReservation(const std::string& bind_host) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (bind_host.empty() || ::inet_pton(AF_INET, bind_host.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = INADDR_ANY;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw ConnectionFailedError("cannot reserve a TCP port on '" + bind_host + "': " + std::strerror(errno));
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~PortReservation() { if (fd_ >= 0) ::close(fd_); }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace

std::string_view algorithm_name(Algorithm a) { return kAlgorithmNames.at(static_cast<std::size_t>(a)); }

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (std::size_t i = 0; i < kAlgorithmNames.size(); ++i)
    if (kAlgorithmNames[i] == name) return static_cast<Algorithm>(i);
  if (name == "tree") return Algorithm::kRecursiveDoubling;
  return std::nullopt;
}

Group::Group(std::shared_ptr<Comm> comm, int rank, int world, GroupOptions options)
    : comm_(std::move(comm)), rank_(rank), world_(world), options_(options), fail_(std::make_shared<FailState>()) {
  if (world < 1) throw InvalidArgumentError("a group needs a world of at least 1 rank, not " + std::to_string(world));
  check_rank(rank, world, "Group");
  if (!comm_) throw InvalidArgumentError("Group: no Comm");
  if (options_.segment_bytes == 0) throw InvalidArgumentError("Group: segment_bytes must be positive");
  peers_.assign(world, nullptr);
  for (int k = 0; k < world; ++k) {
    if (k == rank) continue;
    try {
      peers_[k] = &comm_->peer(node_id(k));
    } catch (const std::out_of_range&) {
      throw InvalidArgumentError("Group: the Comm has no peer '" + node_id(k) + "' (rank " + std::to_string(k) +
                                 " of " + std::to_string(world) + ")");
    }
  }
  start_abort_listeners();
}

Group::~Group() { close(); }

std::unique_ptr<Group> Group::create(const RendezvousSpec& spec, GroupOptions options) {
  // A rank that can reach rank 0 registers even with a bad rank number, so that rank 0's
  // answer tells every rank what is wrong instead of leaving them to time out.
  if (!(spec.peers.empty() && spec.rank != 0 && spec.world >= 1 && !spec.master_addr.empty() && spec.master_port))
    spec.validate();
  CommSpec cs;
  cs.comm = spec.comm;
  std::vector<Peer> dir;
  std::optional<PortReservation> reserved;
  if (!spec.peers.empty()) {
    dir = spec.peers;
    cs.bind_host = spec.bind_host;
  } else {
    reserved.emplace(spec.bind_host);
    try {
      dir = rendezvous_exchange(spec, reserved->port());
    } catch (const CommError&) {
      spec.validate();  // a bad rank that could not tell rank 0 says what is wrong with it
      throw;
    }
    spec.validate();
    cs.bind_host = spec.bind_host.empty() ? "0.0.0.0" : spec.bind_host;
  }
  for (int k = 0; k < spec.world; ++k) {
    Peer p = dir[k];
    p.node_id = node_id(k);
    if (k == spec.rank) cs.local = p; else cs.peers.push_back(p);
  }
  auto comm = Comm::create(cs);
  reserved.reset();
  auto group = std::make_unique<Group>(std::move(comm), spec.rank, spec.world, options);
  group->owns_comm_ = true;
  // Every rank is up and reachable before the group is handed out.
  group->barrier({.timeout = Seconds(std::max(1.0, spec.timeout.count()))});
  return group;
}

void Group::start_abort_listeners() {
  for (int k = 0; k < world_; ++k) {
    if (k == rank_) continue;
    // Re-arms itself after each abort message; ends when the Comm closes.
    struct Listener {
      static void arm(std::weak_ptr<Comm> weak, std::shared_ptr<FailState> fail, Peer peer, int from, int self) {
        auto comm = weak.lock();
        if (!comm) return;
        comm->recv(peer, {.tag = kAbortTag}).then([weak, fail, peer, from, self](Result<Received> got) {
          if (!got.ok()) return;  // closed
          const Dict* d = got.value().value.get_if<Dict>();
          int rank = from;
          ErrorCode code = ErrorCode::kConnectionClosed;
          std::string message = "rank " + std::to_string(from) + " aborted the call";
          std::uint32_t seq = ~0u;
          if (d) {
            if (const Value* v = d->find("rank"); v && v->is<std::int64_t>()) rank = static_cast<int>(v->as<std::int64_t>());
            if (const Value* v = d->find("code"); v && v->is<std::int64_t>()) code = static_cast<ErrorCode>(v->as<std::int64_t>());
            if (const Value* v = d->find("seq"); v && v->is<std::int64_t>()) seq = static_cast<std::uint32_t>(v->as<std::int64_t>());
            if (const Value* v = d->find("message"); v && v->is<std::string>())
              message = "rank " + std::to_string(from) + " reports: " + v->as<std::string>();
          }
          std::vector<std::function<void()>> cancels;
          {
            std::lock_guard lock(fail->mu);
            if (!fail->error) {
              fail->error.emplace(code, rank, message);
              fail->error_seq = seq;
              cancels.swap(fail->cancel_ops);
            }
          }
          fail->aborted.notify_all();
          for (auto& c : cancels) c();
          arm(weak, fail, peer, from, self);
        });
      }
    };
    Listener::arm(comm_, fail_, *peers_[k], k, rank_);
  }
}

Algorithm Group::allreduce_algorithm(std::size_t nbytes, Algorithm requested) const {
  if (requested != Algorithm::kAuto) return requested;
  return nbytes < options_.small_allreduce_bytes ? Algorithm::kRecursiveDoubling : Algorithm::kRing;
}

void Group::barrier(CallOptions options) {
  std::lock_guard lock(call_mu_);
  Call call(*this, "barrier", options, true);
  algo::barrier(call);
}

void Group::broadcast(const Tensor& tensor, int root, CallOptions options) {
  check_rank(root, world_, "broadcast");
  std::lock_guard lock(call_mu_);
  Call call(*this, "broadcast(root " + std::to_string(root) + ", " + describe(tensor) + ")", options, true);
  algo::broadcast(call, tensor, root, options_.segment_bytes);
}

void Group::allgather(const Tensor& input, const Tensor& output, CallOptions options) {
  if (output.dtype() != input.dtype() || output.numel() != input.numel() * world_)
    throw InvalidArgumentError("allgather: the output must be " + std::string(dtype_name(input.dtype())) + " x " +
                               std::to_string(input.numel() * world_) + " (world " + std::to_string(world_) +
                               " x the input's " + std::to_string(input.numel()) + "), not " + describe(output));
  std::lock_guard lock(call_mu_);
  Call call(*this, "allgather(" + describe(input) + ")", options, true);
  std::size_t n = input.numel();
  if (input.data() != output.data() + rank_ * input.nbytes() && n)
    std::memcpy(output.data() + rank_ * input.nbytes(), input.data(), input.nbytes());
  std::vector<std::size_t> off(world_ + 1);
  for (int k = 0; k <= world_; ++k) off[k] = k * n;
  algo::ring_allgather(call, algo::slice(output, 0, n * world_), off, options_.segment_bytes, 0);
}

void Group::reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op, CallOptions options) {
  check_reducible(input, "reduce_scatter");
  auto off = algo::split(input.numel(), world_);
  std::size_t mine = off[rank_ + 1] - off[rank_];
  if (output.dtype() != input.dtype() || output.numel() != mine)
    throw InvalidArgumentError("reduce_scatter: rank " + std::to_string(rank_) + "'s output must be " +
                               std::string(dtype_name(input.dtype())) + " x " + std::to_string(mine) +
                               " (its block of the input's " + std::to_string(input.numel()) + "), not " +
                               describe(output));
  std::lock_guard lock(call_mu_);
  Call call(*this, "reduce_scatter(" + std::string(reduce_op_name(op)) + ", " + describe(input) + ")", options, true);
  Tensor work = Tensor::empty(input.dtype(), {static_cast<std::int64_t>(input.numel())});
  if (input.nbytes()) std::memcpy(work.data(), input.data(), input.nbytes());
  algo::ring_reduce_scatter(call, work, off, op, options_.segment_bytes, 0);
  std::size_t item = dtype_itemsize(input.dtype());
  if (mine) std::memcpy(output.data(), work.data() + off[rank_] * item, mine * item);
}

void Group::allreduce(const Tensor& tensor, ReduceOp op, CallOptions options) {
  check_reducible(tensor, "allreduce");
  Algorithm algorithm = allreduce_algorithm(tensor.nbytes(), options.algorithm);
  std::lock_guard lock(call_mu_);
  Call call(*this,
            "allreduce(" + std::string(reduce_op_name(op)) + ", " + describe(tensor) + ", " +
                std::string(algorithm_name(algorithm)) + ")",
            options, true);
  Tensor flat = algo::slice(tensor, 0, tensor.numel());
  if (algorithm == Algorithm::kRecursiveDoubling) {
    algo::allreduce_recursive_doubling(call, flat, op);
    return;
  }
  auto off = algo::split(tensor.numel(), world_);
  algo::PendingSends pending;
  algo::ring_reduce_scatter(call, flat, off, op, options_.segment_bytes, 0, &pending);
  std::uint32_t steps = algo::ring_phase_steps(call, off, dtype_itemsize(tensor.dtype()), options_.segment_bytes);
  algo::ring_allgather(call, flat, off, options_.segment_bytes, steps, &pending);
}

void Group::send(const Tensor& tensor, int dst, std::uint32_t tag, CallOptions options) {
  check_rank(dst, world_, "send");
  if (dst == rank_) throw InvalidArgumentError("send: rank " + std::to_string(dst) + " is this rank itself");
  if (tag >= (1u << 24)) throw InvalidArgumentError("send: tag " + std::to_string(tag) + " is not below 2^24");
  Call call(*this, "send(to " + std::to_string(dst) + ", " + describe(tensor) + ")", options, false);
  auto f = call.send(dst, algo::slice(tensor, 0, tensor.numel()), tag);
  call.wait(f, dst);
}

void Group::recv(const Tensor& tensor, int src, std::uint32_t tag, CallOptions options) {
  check_rank(src, world_, "recv");
  if (src == rank_) throw InvalidArgumentError("recv: rank " + std::to_string(src) + " is this rank itself");
  if (tag >= (1u << 24)) throw InvalidArgumentError("recv: tag " + std::to_string(tag) + " is not below 2^24");
  Call call(*this, "recv(from " + std::to_string(src) + ", " + describe(tensor) + ")", options, false);
  auto f = call.recv_into(src, algo::slice(tensor, 0, tensor.numel()), tag);
  call.wait(f, src);
}

void Group::close() {
  {
    std::lock_guard lock(fail_->mu);
    if (fail_->closed) return;
    fail_->closed = true;
  }
  if (owns_comm_) comm_->close();
}

}  // namespace wcomm
