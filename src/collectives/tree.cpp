// Latency-bound algorithms: the dissemination barrier, the binomial-tree broadcast and
// recursive-doubling allreduce.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.h"

namespace wcomm::algo {

std::vector<std::size_t> split(std::size_t n, std::size_t parts) {
  std::vector<std::size_t> off(parts + 1);
  for (std::size_t k = 0; k <= parts; ++k) off[k] = k * (n / parts) + std::min(k, n % parts);
  return off;
}

Tensor slice(const Tensor& data, std::size_t begin, std::size_t end) {
  std::size_t item = dtype_itemsize(data.dtype());
  // Shares the owner of data's storage (none for borrowed memory), so a receive still being
  // read into a scratch block keeps it alive.
  return Tensor::from_buffer(Buffer::share(data.buffer().owner(), data.data() + begin * item, (end - begin) * item),
                             data.dtype(), {static_cast<std::int64_t>(end - begin)});
}

void barrier(Group::Call& call) {
  const int w = call.group.world(), r = call.group.rank();
  std::uint32_t step = 0;
  for (int dist = 1; dist < w; dist <<= 1, ++step) {
    int to = (r + dist) % w, from = (r - dist + w) % w;
    auto s = call.send_value(to, Value(), step);
    auto g = call.recv(from, step);
    call.wait(g, from);
    call.wait(s, to);
  }
}

void broadcast(Group::Call& call, const Tensor& data, int root, std::size_t segment_bytes) {
  const int w = call.group.world(), r = call.group.rank();
  if (w == 1) return;
  const int v = (r - root + w) % w;  // rank relative to the root
  int mask = 1, parent = -1;
  while (mask < w) {
    if (v & mask) {
      parent = (v - mask + root) % w;
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < w) children.push_back((v + mask + root) % w);

  std::size_t item = dtype_itemsize(data.dtype());
  std::size_t n = data.numel();
  std::size_t segments = std::max<std::size_t>(1, std::min<std::size_t>(
                                                      (n * item + segment_bytes - 1) / segment_bytes, kMaxSteps));
  auto off = split(n, segments);
  std::vector<Future<Received>> recvs;
  if (parent >= 0)
    for (std::size_t j = 0; j < segments; ++j) recvs.push_back(call.recv_into(parent, slice(data, off[j], off[j + 1]), j));
  std::vector<Future<SendResult>> sends;
  std::vector<int> to;
  for (std::size_t j = 0; j < segments; ++j) {
    if (parent >= 0) call.wait(recvs[j], parent);
    for (int c : children) {
      sends.push_back(call.send(c, slice(data, off[j], off[j + 1]), j));
      to.push_back(c);
    }
  }
  call.wait_all(sends, to);
}

void allreduce_recursive_doubling(Group::Call& call, const Tensor& data, ReduceOp op) {
  const int w = call.group.world(), r = call.group.rank();
  if (w == 1) return;
  const std::size_t n = data.numel();
  Tensor scratch = Tensor::empty(data.dtype(), {static_cast<std::int64_t>(n)});
  int pof2 = 1;
  while (pof2 * 2 <= w) pof2 *= 2;
  const int extra = w - pof2;
  std::uint32_t step = 0;
  // Fold: among the first 2*extra ranks, each even rank hands its data to the odd rank above
  // it and waits for the result; the rest continue as a power-of-two world.
  int vrank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      auto s = call.send(r + 1, data, step);
      call.wait(s, r + 1);
      auto g = call.recv_into(r + 1, data, kMaxSteps - 1);
      call.wait(g, r + 1);
      return;
    }
    auto g = call.recv_into(r - 1, scratch, step);
    call.wait(g, r - 1);
    reduce_into(data.data(), scratch.data(), n, data.dtype(), op);
    vrank = r / 2;
  } else {
    vrank = r - extra;
  }
  ++step;
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
    int partner = real(vrank ^ mask);
    auto s = call.send(partner, data, step);
    auto g = call.recv_into(partner, scratch, step);
    call.wait(g, partner);
    call.wait(s, partner);  // data is read by the send until it completes
    reduce_into(data.data(), scratch.data(), n, data.dtype(), op);
  }
  if (r < 2 * extra) {  // odd folded rank: hand the result back
    auto s = call.send(r - 1, data, kMaxSteps - 1);
    call.wait(s, r - 1);
  }
}

}  // namespace wcomm::algo
