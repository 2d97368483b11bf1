// The pipelined ring: reduce-scatter and allgather phases (together: the bandwidth-optimal
// allreduce). Each of the W blocks is cut into segments; a segment received (and reduced) at
// step s is sent on at step s+1 at once, so sending one segment overlaps receiving and reducing
// the next. Receives land in a scratch buffer (reduce-scatter) or straight in place (allgather).
#include <algorithm>

#include "collectives/algorithms.h"

namespace wcomm::algo {
namespace {

struct Plan {
  int w, r, next, prev;
  std::size_t segments;  // per block
  std::size_t item;
  // Element range of segment j of block b.
  std::pair<std::size_t, std::size_t> range(const std::vector<std::size_t>& off, int b, std::size_t j) const {
    std::size_t len = off[b + 1] - off[b];
    std::size_t lo = off[b] + j * (len / segments) + std::min(j, len % segments);
    std::size_t hi = lo + len / segments + (j < len % segments ? 1 : 0);
    return {lo, hi};
  }
  int block(int k) const { return ((k % w) + w) % w; }
};

Plan make_plan(const Group::Call& call, const std::vector<std::size_t>& off, std::size_t item,
               std::size_t segment_bytes) {
  Plan p;
  p.w = call.group.world();
  p.r = call.group.rank();
  p.next = (p.r + 1) % p.w;
  p.prev = (p.r - 1 + p.w) % p.w;
  p.item = item;
  std::size_t largest = 0;
  for (int b = 0; b < p.w; ++b) largest = std::max(largest, off[b + 1] - off[b]);
  std::size_t segments = (largest * item + segment_bytes - 1) / std::max<std::size_t>(segment_bytes, 1);
  // Tag steps are 16 bits: (W - 1) steps of `segments` each, per phase, two phases.
  std::size_t budget = (kMaxSteps / 2 - 1) / std::max(1, p.w - 1);
  p.segments = std::clamp<std::size_t>(segments, 1, budget);
  return p;
}

}  // namespace

std::uint32_t ring_phase_steps(const Group::Call& call, const std::vector<std::size_t>& offsets, std::size_t itemsize,
                               std::size_t segment_bytes) {
  Plan p = make_plan(call, offsets, itemsize, segment_bytes);
  return static_cast<std::uint32_t>((p.w - 1) * p.segments);
}

void ring_reduce_scatter(Group::Call& call, const Tensor& data, const std::vector<std::size_t>& off, ReduceOp op,
                         std::size_t segment_bytes, std::uint32_t first_step, PendingSends* pending) {
  Plan p = make_plan(call, off, dtype_itemsize(data.dtype()), segment_bytes);
  if (p.w == 1) return;
  const DType dtype = data.dtype();
  std::size_t largest = 0;
  for (int b = 0; b < p.w; ++b) largest = std::max(largest, off[b + 1] - off[b]);
  // Two scratch blocks: step s receives into scratch[s % 2] while step s-1's is reduced.
  Tensor scratch[2] = {Tensor::empty(dtype, {static_cast<std::int64_t>(largest)}),
                       Tensor::empty(dtype, {static_cast<std::int64_t>(largest)})};
  auto step_of = [&](int s, std::size_t j) { return first_step + static_cast<std::uint32_t>(s * p.segments + j); };
  // Step s sends block r-s-1 and receives block r-s-2, so that block r ends reduced here.
  auto post_recvs = [&](int s) {
    std::vector<Future<Received>> rs;
    int b = p.block(p.r - s - 2);
    for (std::size_t j = 0; j < p.segments; ++j) {
      auto [lo, hi] = p.range(off, b, j);
      rs.push_back(call.recv_into(p.prev, slice(scratch[s % 2], lo - off[b], hi - off[b]), step_of(s, j)));
    }
    return rs;
  };
  PendingSends sends(p.w);  // by block
  {
    int b = p.block(p.r - 1);
    for (std::size_t j = 0; j < p.segments; ++j) {
      auto [lo, hi] = p.range(off, b, j);
      sends[b].push_back(call.send(p.next, slice(data, lo, hi), step_of(0, j)));
    }
  }
  std::vector<Future<Received>> recvs = post_recvs(0);
  for (int s = 0; s < p.w - 1; ++s) {
    std::vector<Future<Received>> ahead;
    if (s + 1 < p.w - 1) ahead = post_recvs(s + 1);
    int b = p.block(p.r - s - 2);
    for (std::size_t j = 0; j < p.segments; ++j) {
      call.wait(recvs[j], p.prev);
      auto [lo, hi] = p.range(off, b, j);
      reduce_into(data.data() + lo * p.item, scratch[s % 2].data() + (lo - off[b]) * p.item, hi - lo, dtype, op);
      if (s + 1 < p.w - 1) sends[b].push_back(call.send(p.next, slice(data, lo, hi), step_of(s + 1, j)));
    }
    recvs = std::move(ahead);
  }
  if (pending) {
    *pending = std::move(sends);
    return;
  }
  for (auto& block : sends)
    for (auto& f : block) call.wait(f, p.next);
}

void ring_allgather(Group::Call& call, const Tensor& data, const std::vector<std::size_t>& off,
                    std::size_t segment_bytes, std::uint32_t first_step, PendingSends* pending) {
  Plan p = make_plan(call, off, dtype_itemsize(data.dtype()), segment_bytes);
  if (p.w == 1) return;
  auto step_of = [&](int s, std::size_t j) { return first_step + static_cast<std::uint32_t>(s * p.segments + j); };
  // Step s sends block r-s and receives block r-s-1 straight into place.
  auto post_recvs = [&](int s) {
    std::vector<Future<Received>> rs;
    int b = p.block(p.r - s - 1);
    if (pending)  // the reduce-scatter phase's sends of this block read it: let them finish
      for (auto& f : (*pending)[b]) call.wait(f, p.next);
    for (std::size_t j = 0; j < p.segments; ++j) {
      auto [lo, hi] = p.range(off, b, j);
      rs.push_back(call.recv_into(p.prev, slice(data, lo, hi), step_of(s, j)));
    }
    return rs;
  };
  std::vector<Future<SendResult>> sends;
  for (std::size_t j = 0; j < p.segments; ++j) {
    auto [lo, hi] = p.range(off, p.r, j);
    sends.push_back(call.send(p.next, slice(data, lo, hi), step_of(0, j)));
  }
  std::vector<Future<Received>> recvs = post_recvs(0);
  for (int s = 0; s < p.w - 1; ++s) {
    std::vector<Future<Received>> ahead;
    if (s + 1 < p.w - 1) ahead = post_recvs(s + 1);
    int b = p.block(p.r - s - 1);
    for (std::size_t j = 0; j < p.segments; ++j) {
      call.wait(recvs[j], p.prev);
      auto [lo, hi] = p.range(off, b, j);
      if (s + 1 < p.w - 1) sends.push_back(call.send(p.next, slice(data, lo, hi), step_of(s + 1, j)));
    }
    recvs = std::move(ahead);
  }
  std::vector<int> to(sends.size(), p.next);
  call.wait_all(sends, to);
  if (pending)
    for (auto& block : *pending)
      for (auto& f : block) call.wait(f, p.next);
}

}  // namespace wcomm::algo
