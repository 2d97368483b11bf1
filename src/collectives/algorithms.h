// The collective algorithms, each a function over one Call (tags, deadline and failure handling
// are the Call's). Ranks are 0..W-1; data is one contiguous run of elements.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/call.h"

namespace wcomm::algo {

// Element offsets of `parts` near-equal blocks of n elements (parts + 1 entries).
std::vector<std::size_t> split(std::size_t n, std::size_t parts);

// A tensor over elements [begin, end) of data (1-D, borrowed).
Tensor slice(const Tensor& data, std::size_t begin, std::size_t end);

// Dissemination barrier: ceil(log2 W) rounds of one empty message each way.
void barrier(Group::Call& call);
// Binomial tree from root, pipelined in segments of segment_bytes.
void broadcast(Group::Call& call, const Tensor& data, int root, std::size_t segment_bytes);
// Recursive doubling (with a fold for a world that is not a power of two).
void allreduce_recursive_doubling(Group::Call& call, const Tensor& data, ReduceOp op);

// Ring phases over the blocks `offsets` (W blocks): after the reduce-scatter phase this rank
// holds block `rank` reduced; the allgather phase sends each rank's block round the ring. Both
// are pipelined: a segment is forwarded as soon as it has arrived (and been reduced).
// first_step: the tag step the phase starts at.
// The reduce-scatter phase's sends still in flight, by block: they read `data`, so a block
// must not be received into before its sends have completed.
using PendingSends = std::vector<std::vector<Future<SendResult>>>;
void ring_reduce_scatter(Group::Call& call, const Tensor& data, const std::vector<std::size_t>& offsets,
                         ReduceOp op, std::size_t segment_bytes, std::uint32_t first_step,
                         PendingSends* pending = nullptr);  // nullptr: wait for them all here
void ring_allgather(Group::Call& call, const Tensor& data, const std::vector<std::size_t>& offsets,
                    std::size_t segment_bytes, std::uint32_t first_step, PendingSends* pending = nullptr);
// Steps one ring phase uses (for the second phase's first_step).
std::uint32_t ring_phase_steps(const Group::Call& call, const std::vector<std::size_t>& offsets,
                               std::size_t itemsize, std::size_t segment_bytes);

}  // namespace wcomm::algo
