// The per-rank loop of `wcomm multirank` and V0.1's collectives: the rank-0-centred barrier,
// the root's broadcast, the ring allgather of {origin, payload} items and the ring allreduce
// (V0.1's XOR over bytes, or a real reduction with --reduce / --dtype; or wcomm's Group
// allreduce with --algorithm).
#include "multirank/multirank_rank.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "wcomm/errors.h"

namespace wcomm::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct Runner {
  RankContext& ctx;
  const MultirankSettings& s;
  std::map<std::int64_t, Buffer> zeros;  // zero-filled payloads by size
  DType dtype;
  ReduceOp op;
  std::size_t item;

  explicit Runner(RankContext& c)
      : ctx(c), s(*c.settings), dtype(*parse_dtype(s.dtype)), op(*parse_reduce_op(s.reduce)), item(dtype_itemsize(dtype)) {}

  CommOptions opts(const std::string& collective, std::int64_t iteration, std::uint32_t step) const {
    return {.tag = collective_tag_base(collective) + static_cast<std::uint32_t>(iteration) * 256u + step,
            .timeout = Seconds(s.timeout)};
  }
  const Peer& peer(int rank) const { return *ctx.peers[rank]; }
  // Ring neighbours: next and prev of this rank's position in the ring (V0.1 1.7).
  int ring_at(int position) const {
    const int w = ctx.world, k = ((position % w) + w) % w;
    return ctx.ring.empty() ? k : ctx.ring[static_cast<std::size_t>(k)];
  }
  int position_of(int rank) const {
    if (ctx.ring.empty()) return rank;
    return static_cast<int>(std::find(ctx.ring.begin(), ctx.ring.end(), rank) - ctx.ring.begin());
  }
  Bytes zero_payload(std::int64_t size) {
    auto it = zeros.find(size);
    if (it == zeros.end()) {
      Buffer b = Buffer::allocate(static_cast<std::size_t>(size));
      std::memset(b.data(), 0, b.size());
      it = zeros.emplace(size, b).first;
    }
    return Bytes(it->second);
  }

  // V0.1's barrier, always centred on rank 0 (also ring_exchange's, on its own tag step).
  void barrier(std::int64_t i, const std::string& collective = "barrier", std::uint32_t step = 0) {
    const int w = ctx.world;
    if (ctx.rank == 0) {
      std::vector<Future<Received>> arrivals;
      for (int r = 1; r < w; ++r) arrivals.push_back(ctx.comm->recv(peer(r), opts(collective, i, step)));
      for (auto& f : arrivals) f.get();
      std::vector<Future<SendResult>> releases;
      for (int r = 1; r < w; ++r) releases.push_back(ctx.comm->send(Bytes("release"), peer(r), {}, opts(collective, i, step)));
      for (auto& f : releases) f.get();
    } else {
      auto sent = ctx.comm->send(Bytes("arrive"), peer(0), {}, opts(collective, i, step));
      auto got = ctx.comm->recv(peer(0), opts(collective, i, step));
      sent.get();
      got.get();
    }
  }

  // A send timed from its start to its local completion (V0.1's send service time), in ms.
  struct TimedSend {
    Clock::time_point start;
    Future<SendResult> future;
    double wait_ms() {
      future.get();
      return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
  };

  void check_payload(const Received& got, std::int64_t size, const char* what) {
    const Bytes* b = got.value.get_if<Bytes>();
    if (!b || static_cast<std::int64_t>(b->size()) != size || !got.piggypayload.is_none()) throw ProtocolError(what);
  }

  // ring_exchange: phases of c active senders each; returns this rank's send service time.
  std::vector<double> ring_exchange(std::int64_t i, std::int64_t size) {
    const int w = ctx.world, p = position_of(ctx.rank), next = ring_at(p + 1), prev = ring_at(p - 1);
    const int c = static_cast<int>(s.ring_exchange_concurrency.value_or(w));
    const int phases = (w + c - 1) / c;
    std::vector<double> service;
    for (int k = 0; k < phases; ++k) {
      auto active = [&](int r) { return position_of(r) >= k * c && position_of(r) < k * c + c; };
      std::optional<TimedSend> sent;
      std::optional<Future<Received>> got;
      if (active(ctx.rank))
        sent = TimedSend{Clock::now(), ctx.comm->send(zero_payload(size), peer(next), {}, opts("ring_exchange", i, 2 * k))};
      if (active(prev)) got = ctx.comm->recv(peer(prev), opts("ring_exchange", i, 2 * k));
      if (got) check_payload(got->get(), size, "ring exchange received an invalid payload");
      if (sent) service.push_back(sent->wait_ms());
      barrier(i, "ring_exchange", 2 * k + 1);
    }
    return service;
  }

  // all_to_all_exchange: everyone to everyone at once; send service times by destination.
  std::vector<double> all_to_all(std::int64_t i, std::int64_t size) {
    std::vector<TimedSend> sends;
    std::vector<Future<Received>> recvs;
    for (int r = 0; r < ctx.world; ++r) {
      if (r == ctx.rank) continue;
      sends.push_back({Clock::now(), ctx.comm->send(zero_payload(size), peer(r), {}, opts("all_to_all_exchange", i, 0))});
      recvs.push_back(ctx.comm->recv(peer(r), opts("all_to_all_exchange", i, 0)));
    }
    for (auto& f : recvs) check_payload(f.get(), size, "all-to-all exchange received an invalid payload");
    std::vector<double> service;
    for (auto& t : sends) service.push_back(t.wait_ms());
    return service;
  }

  void broadcast(std::int64_t i, std::int64_t size) {
    const int root = static_cast<int>(s.broadcast_root);
    if (ctx.rank == root) {
      std::vector<Future<SendResult>> sends;
      for (int r = 0; r < ctx.world; ++r)
        if (r != root) sends.push_back(ctx.comm->send(zero_payload(size), peer(r), {}, opts("broadcast", i, 0)));
      for (auto& f : sends) f.get();
      return;
    }
    Received got = ctx.comm->recv(peer(root), opts("broadcast", i, 0)).get();
    const Bytes* b = got.value.get_if<Bytes>();
    if (!b || static_cast<std::int64_t>(b->size()) != size) throw ProtocolError("broadcast payload is invalid");
  }

  void allgather(std::int64_t i, std::int64_t size) {
    const int w = ctx.world, next = ring_at(position_of(ctx.rank) + 1), prev = ring_at(position_of(ctx.rank) - 1);
    Value item = Dict{{"origin", ctx.rank}, {"payload", zero_payload(size)}};
    for (int step = 0; step < w - 1; ++step) {
      auto sent = ctx.comm->send(item, peer(next), {}, opts("allgather", i, step));
      Received got = ctx.comm->recv(peer(prev), opts("allgather", i, step)).get();
      sent.get();
      if (!got.value.is<Dict>() || !got.piggypayload.is_none()) throw ProtocolError("allgather received an invalid item");
      item = std::move(got.value);
    }
  }

  // The value every element of this rank's chunks holds: V0.1's rank byte for bitwise
  // operators, rank + 1 for arithmetic ones (so that prod and min are not all zero).
  Buffer element_of(int rank) const {
    Buffer b = Buffer::allocate(item);
    std::memset(b.data(), 0, item);
    bool bitwise = op == ReduceOp::kBitXor || op == ReduceOp::kBitAnd || op == ReduceOp::kBitOr;
    double v = bitwise ? rank : rank + 1;
    switch (dtype) {
      case DType::kUInt8: *b.data() = static_cast<std::uint8_t>(v); break;
      case DType::kInt8: *reinterpret_cast<std::int8_t*>(b.data()) = static_cast<std::int8_t>(v); break;
      case DType::kInt32: *reinterpret_cast<std::int32_t*>(b.data()) = static_cast<std::int32_t>(v); break;
      case DType::kInt64: *reinterpret_cast<std::int64_t*>(b.data()) = static_cast<std::int64_t>(v); break;
      case DType::kFloat32: *reinterpret_cast<float*>(b.data()) = static_cast<float>(v); break;
      case DType::kFloat64: *reinterpret_cast<double*>(b.data()) = v; break;
      case DType::kFloat16: case DType::kBFloat16: {
        // Small integers: exact in both; built from the float32 bits.
        float f = static_cast<float>(v);
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        std::uint16_t h = dtype == DType::kBFloat16
                              ? static_cast<std::uint16_t>(bits >> 16)
                              : static_cast<std::uint16_t>(((bits >> 16) & 0x8000) |
                                                           (v == 0 ? 0 : ((((bits >> 23) & 0xFF) - 112) << 10) | ((bits >> 13) & 0x3FF)));
        std::memcpy(b.data(), &h, 2);
        break;
      }
      default: break;
    }
    return b;
  }

  Buffer expected_element() const {
    Buffer acc = element_of(0);
    for (int r = 1; r < ctx.world; ++r) {
      Buffer e = element_of(r);
      reduce_into(acc.data(), e.data(), 1, dtype, op);
    }
    return acc;
  }

  Buffer filled(std::size_t bytes, const Buffer& element) const {
    Buffer b = Buffer::allocate(bytes);
    fill_with(b.data(), bytes, element);
    return b;
  }

  // Repeats element over bytes (a whole number of elements): one copy, then doubling ones, so
  // a 64 MiB fill of one-byte elements costs a few memcpys, not 64 million.
  static void fill_with(std::uint8_t* out, std::size_t bytes, const Buffer& element) {
    const std::size_t n = element.size();
    if (bytes < n) return;
    std::memcpy(out, element.data(), n);
    for (std::size_t done = n; done < bytes;) {
      const std::size_t step = std::min(done, bytes - done);
      std::memcpy(out + done, out, step);
      done += step;
    }
  }

  // Whether b is element repeated: its first element is, and b equals itself shifted by one
  // element (so every element equals the one before it).
  static bool all_equal(const Buffer& b, const Buffer& element) {
    const std::size_t n = element.size();
    if (b.size() < n) return b.size() == 0;
    return std::memcmp(b.data(), element.data(), n) == 0 && std::memcmp(b.data(), b.data() + n, b.size() - n) == 0;
  }

  void ring_allreduce_v01(std::int64_t i, std::int64_t size, const Buffer& mine, const Buffer& expect) {
    const int w = ctx.world, p = position_of(ctx.rank), next = ring_at(p + 1), prev = ring_at(p - 1);
    const std::int64_t shard = size / w;
    const std::int64_t block = std::min(s.allreduce_block_bytes.value_or(shard), shard);
    std::uint32_t step = 0;
    auto mod = [w](int k) { return ((k % w) + w) % w; };
    for (std::int64_t off = 0; off < shard; off += block) {
      std::size_t len = static_cast<std::size_t>(std::min(block, shard - off));
      std::vector<Buffer> chunks;
      for (int k = 0; k < w; ++k) chunks.push_back(filled(len, mine));
      auto exchange = [&](const Buffer& out) {
        auto sent = ctx.comm->send(Bytes(out), peer(next), {}, opts("ring_allreduce", i, step));
        Received got = ctx.comm->recv(peer(prev), opts("ring_allreduce", i, step)).get();
        sent.get();
        ++step;
        const Bytes* b = got.value.get_if<Bytes>();
        if (!b || !got.piggypayload.is_none()) throw ProtocolError("allreduce received an invalid chunk");
        if (b->size() != len) throw ProtocolError("allreduce chunks have different sizes");
        return b->buffer;
      };
      for (int st = 0; st < w - 1; ++st) {
        Buffer got = exchange(chunks[mod(p - st)]);
        Buffer& into = chunks[mod(p - st - 1)];
        reduce_into(into.data(), got.data(), len / item, dtype, op);
      }
      for (int st = 0; st < w - 1; ++st) chunks[mod(p - st)] = exchange(chunks[mod(p - st + 1)]);
      for (auto& c : chunks)
        if (!all_equal(c, expect)) throw ProtocolError("ring allreduce produced an incorrect result");
    }
  }

  // Times one (collective, size): returns the samples after warm-up, in ms; the exchange
  // collectives' send service times go to `service` (one list per timed iteration).
  std::vector<double> run(const std::string& c, std::int64_t size, nlohmann::json& service) {
    std::vector<double> samples;
    service = nlohmann::json::array();
    Buffer mine, expect;
    Tensor tensor;
    bool group_allreduce = c == "ring_allreduce" && s.algorithm != "v01";
    CallOptions call{.timeout = Seconds(s.timeout), .algorithm = parse_algorithm(s.algorithm).value_or(Algorithm::kAuto)};
    if (c == "ring_allreduce") {
      mine = element_of(ctx.rank);
      expect = expected_element();
      if (group_allreduce) tensor = Tensor::empty(dtype, {size / static_cast<std::int64_t>(item)});
    }
    for (std::int64_t i = 0; i < s.warmup_rounds + s.rounds; ++i) {
      if (group_allreduce) {
        fill_with(tensor.data(), tensor.nbytes(), mine);
        // wcomm's ranks line up before the clock starts, so that one rank's filling and
        // checking (outside the timed region) is not timed as another's wait. V0.1's ring
        // keeps V0.1's loop: no barrier, as a V0.1 rank expects none.
        ctx.group->barrier(call);
      }
      auto start = Clock::now();
      std::vector<double> times;
      if (c == "barrier") barrier(i);
      else if (c == "ring_exchange") times = ring_exchange(i, size);
      else if (c == "all_to_all_exchange") times = all_to_all(i, size);
      else if (c == "broadcast") broadcast(i, size);
      else if (c == "allgather") allgather(i, size);
      else if (group_allreduce) ctx.group->allreduce(tensor, op, call);
      else if (c == "ring_allreduce") ring_allreduce_v01(i, size, mine, expect);
      else throw InvalidArgumentError("collective '" + c + "' is not implemented by wcomm multirank yet");
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (group_allreduce && !all_equal(tensor.buffer(), expect))
        throw ProtocolError("ring allreduce produced an incorrect result");
      if (i >= s.warmup_rounds) {
        samples.push_back(ms);
        if (c == "ring_exchange" || c == "all_to_all_exchange") service.push_back(times);
      }
    }
    return samples;
  }
};

}  // namespace

RankContext rank_context(int rank, int world, std::shared_ptr<Comm> comm, Group* group,
                         const MultirankSettings& settings) {
  RankContext ctx;
  ctx.rank = rank;
  ctx.world = world;
  ctx.peers.assign(world, nullptr);
  for (int k = 0; k < world; ++k)
    if (k != rank) ctx.peers[k] = &comm->peer("rank-" + std::to_string(k));
  ctx.comm = std::move(comm);
  ctx.group = group;
  ctx.settings = &settings;
  return ctx;
}

nlohmann::json run_rank(RankContext& ctx) {
  Runner runner(ctx);
  nlohmann::json samples = nlohmann::json::object();
  nlohmann::json service_ms = nlohmann::json::object();
  for (const std::string& c : ctx.settings->collectives) {
    std::vector<std::int64_t> sizes = c == "barrier" ? std::vector<std::int64_t>{0} : ctx.settings->payload_sizes;
    for (std::int64_t size : sizes) {
      nlohmann::json service;
      std::vector<double> ms = runner.run(c, size, service);
      samples[c][std::to_string(size)] = ms;
      if (c == "ring_exchange" || c == "all_to_all_exchange") service_ms[c][std::to_string(size)] = service;
      if (ctx.progress) {
        std::vector<double> sorted = ms;
        std::sort(sorted.begin(), sorted.end());
        std::fprintf(stderr, "multirank: rank %d %s %lld B: p50 %.3f ms over %zu rounds\n", ctx.rank, c.c_str(),
                     static_cast<long long>(size), sorted[sorted.size() / 2], sorted.size());
      }
    }
  }
  nlohmann::json result = {{"rank", ctx.rank}, {"samples_ms", samples}};
  if (!service_ms.empty()) result["send_service_ms"] = service_ms;
  return result;
}

}  // namespace wcomm::tools
