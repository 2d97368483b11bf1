// Group: a fixed set of ranks 0..world-1 over Comm, with barrier, broadcast, allgather,
// reduce_scatter, allreduce and send/recv by rank on Tensors (docs/collectives.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "wcomm/collectives/reduce.h"
#include "wcomm/collectives/rendezvous.h"
#include "wcomm/comm.h"

namespace wcomm {

// How allreduce is computed. kAuto picks recursive doubling below
// GroupOptions::small_allreduce_bytes and the pipelined ring from there on.
enum class Algorithm : std::uint8_t { kAuto, kRing, kRecursiveDoubling };
std::string_view algorithm_name(Algorithm algorithm);  // "auto", "ring", "recursive_doubling"
std::optional<Algorithm> parse_algorithm(std::string_view name);

struct GroupOptions {
  Seconds timeout = Seconds(300);  // per call, unless CallOptions::timeout says otherwise
  std::size_t small_allreduce_bytes = 256 << 10;  // kAuto: recursive doubling below this
  std::size_t segment_bytes = 4 << 20;            // pipeline unit of the ring and of broadcast
};

struct CallOptions {
  std::optional<Seconds> timeout = {};  // none: GroupOptions::timeout
  Algorithm algorithm = Algorithm::kAuto;  // allreduce only
};

// The error every rank's call fails with when any rank fails, times out, or called the
// collective with other arguments. code() is the cause's (kOperationTimeout,
// kConnectionClosed, kInvalidArgument, ...); rank() is the rank at fault (-1: unknown).
// After such an error the group is broken: every later call fails with it at once.
class CollectiveError : public CommError {
 public:
  CollectiveError(ErrorCode code, int rank, const std::string& message) : CommError(code, message), rank_(rank) {}
  int rank() const noexcept { return rank_; }

 private:
  int rank_;
};

// One rank of a group. Calls are collective: every rank makes the same calls in the same order
// with matching arguments (sizes, dtypes, op, root). Tensors are used in place (their memory is
// read and written directly; it must stay valid for the call). Any thread may call: collective
// calls on one Group run one at a time (in the order they take its lock); send / recv by rank
// may run beside them, e.g. a send on one thread and a recv on another.
class Group {
 public:
  // Rendezvous (rendezvous.h) and a Comm of its own: node "rank-<rank>" at the advertised
  // address, every other rank as a peer; returns once every rank is connected (a barrier).
  static std::unique_ptr<Group> create(const RendezvousSpec& spec, GroupOptions options = {});
  // Over an existing Comm whose peers include "rank-<k>" for every other rank k; the group
  // takes the Comm tags 0xC0000000..0xDFFFFFFF for itself.
  Group(std::shared_ptr<Comm> comm, int rank, int world, GroupOptions options = {});
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::shared_ptr<Comm>& comm() const { return comm_; }

  void barrier(CallOptions options = {});
  // tensor: the root's data on the root, overwritten with it everywhere else.
  void broadcast(const Tensor& tensor, int root, CallOptions options = {});
  // output holds world * input.numel() elements: rank k's input at [k * n, (k + 1) * n).
  void allgather(const Tensor& input, const Tensor& output, CallOptions options = {});
  // input's n elements are split into world blocks, block k being [k*(n/W) + min(k, n%W), ...)
  // (the first n % W blocks one element longer); output (exactly block `rank`'s length)
  // receives that block reduced over every rank. input is not modified.
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::kSum,
                      CallOptions options = {});
  // tensor = op over every rank's tensor, in place; every rank ends with identical bits.
  void allreduce(const Tensor& tensor, ReduceOp op = ReduceOp::kSum, CallOptions options = {});
  // Point to point by rank (not collective): FIFO per (pair, tag); tag < 2^24.
  void send(const Tensor& tensor, int dst, std::uint32_t tag = 0, CallOptions options = {});
  void recv(const Tensor& tensor, int src, std::uint32_t tag = 0, CallOptions options = {});

  // Which algorithm allreduce uses for this many bytes (kAuto's choice).
  Algorithm allreduce_algorithm(std::size_t nbytes, Algorithm requested = Algorithm::kAuto) const;

  // Closes the Comm if the group created it. Idempotent.
  void close();

  struct Call;

 private:
  friend struct Call;
  void start_abort_listeners();
  void on_abort(int from, const Value& value);

  std::shared_ptr<Comm> comm_;
  int rank_;
  int world_;
  GroupOptions options_;
  std::vector<const Peer*> peers_;  // by rank; nullptr for this rank
  bool owns_comm_ = false;
  std::uint32_t seq_ = 0;
  std::mutex call_mu_;  // one call at a time

  // Shared with the abort listeners' callbacks (which may outlive a call).
  struct FailState;
  std::shared_ptr<FailState> fail_;
};

}  // namespace wcomm
