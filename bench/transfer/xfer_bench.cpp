// xfer_bench: one-sided transfer figures beside their references, measured in the same run.
//   xfer_bench write BACKEND SIZE ITERS   WRITE of SIZE bytes into another process, and a
//                                         one-thread memcpy of SIZE bytes for reference
//   xfer_bench small BACKEND SIZE SECONDS INFLIGHT   transfers per second with INFLIGHT posted
// The target agent is a forked child; metadata travels over a pipe. UCX_TLS picks UCX's
// transports. Prints one JSON object per run on stdout.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/xfer/agent.h"

using namespace wcomm::xfer;
using Clock = std::chrono::steady_clock;

namespace {

// A pre-faulted buffer; with XFER_BENCH_HUGEPAGES=1, 2 MiB aligned and madvise(MADV_HUGEPAGE)
// (transparent huge pages in "madvise" mode): process_vm_writev pins fewer page-table levels.
struct Buffer {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  Buffer(std::size_t n, std::uint8_t fill) : size(n) {
    const std::size_t align = 2u << 20;
    data = static_cast<std::uint8_t*>(std::aligned_alloc(align, (n + align - 1) / align * align));
    if (std::getenv("XFER_BENCH_HUGEPAGES")) ::madvise(data, (n + align - 1) / align * align, MADV_HUGEPAGE);
    std::memset(data, fill, n);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

struct Target {
  pid_t pid = -1;
  int stop_fd = -1;  // closing it tells the child to exit
  std::string metadata;
  std::uint64_t base = 0;
};

bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// A child process with an agent and `size` registered, pre-faulted bytes.
Target spawn_target(BackendKind backend, std::size_t size) {
  int up[2], down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0) std::exit(1);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(up[0]);
    ::close(down[1]);
    auto agent = Agent::create({.name = "target", .backend = backend});
    std::unique_ptr<Buffer> memory;
    std::uint8_t* target = nullptr;
    if (std::getenv("XFER_BENCH_ALLOCATE")) {  // the agent's own memory (ucx: UCX-allocated shm)
      auto p = agent->allocate_memory(size);
      if (!p) _exit(2);
      target = static_cast<std::uint8_t*>(p.value());
      std::memset(target, 1, size);
    } else {
      memory = std::make_unique<Buffer>(size, 1);  // touched: no page faults during the run
      target = memory->data;
      if (!agent->register_memory(target, size)) _exit(2);
    }
    const std::string meta = agent->metadata();
    const std::uint64_t n = meta.size(), base = reinterpret_cast<std::uint64_t>(target);
    (void)!::write(up[1], &n, sizeof n);
    (void)!::write(up[1], meta.data(), meta.size());
    (void)!::write(up[1], &base, sizeof base);
    char c;
    while (::read(down[0], &c, 1) > 0) {
    }
    agent.reset();
    _exit(0);
  }
  ::close(up[1]);
  ::close(down[0]);
  Target t;
  t.pid = pid;
  t.stop_fd = down[1];
  std::uint64_t n = 0;
  if (!read_all(up[0], &n, sizeof n)) std::exit(1);
  t.metadata.resize(n);
  if (!read_all(up[0], t.metadata.data(), n) || !read_all(up[0], &t.base, sizeof t.base)) std::exit(1);
  ::close(up[0]);
  return t;
}

void stop(Target& t) {
  ::close(t.stop_fd);
  int status = 0;
  ::waitpid(t.pid, &status, 0);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int run_write(BackendKind backend, std::size_t size, int iters) {
  Target target = spawn_target(backend, size);
  Buffer src(size, 2), dst(size, 3);
  AgentConfig config{.name = "bench", .backend = backend};
  // Tuning knobs for the cma figures: XFER_BENCH_CMA_THREADS, XFER_BENCH_CHUNK_BYTES.
  if (const char* v = std::getenv("XFER_BENCH_CMA_THREADS")) config.cma_threads = static_cast<unsigned>(std::atoi(v));
  if (const char* v = std::getenv("XFER_BENCH_CHUNK_BYTES")) config.chunk_bytes = std::strtoull(v, nullptr, 10);
  auto agent = Agent::create(config);
  if (!agent->register_memory(src.data, size)) return 1;
  auto remote = agent->add_remote(target.metadata);
  if (!remote) {
    std::fprintf(stderr, "%s\n", remote.error().message.c_str());
    return 1;
  }
  const DescList local{{reinterpret_cast<std::uint64_t>(src.data), size, 0}};
  const DescList far{{target.base, size, 0}};
  auto once = [&] {
    auto h = agent->post(Op::kWrite, local, remote.value(), far).value();
    const XferStatus s = agent->wait(h, std::chrono::seconds(60));
    if (s.state != XferState::kDone) {
      std::fprintf(stderr, "transfer failed: %s\n", s.reason.c_str());
      std::exit(1);
    }
    (void)agent->release(h);
  };
  once();  // warm-up (connections, first touches)
  // Transfers and memcpy take turns, so a drift of the machine reaches both alike.
  double xfer_best = 1e9, copy_best = 1e9, xfer_sum = 0, copy_sum = 0;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    once();
    const double x = seconds_since(t0);
    t0 = Clock::now();
    std::memcpy(dst.data, src.data, size);
    const double c = seconds_since(t0);
    xfer_best = std::min(xfer_best, x);
    copy_best = std::min(copy_best, c);
    xfer_sum += x;
    copy_sum += c;
    src.data[i % size] ^= dst.data[(i * 7) % size];  // keeps the copy from being optimised away
  }
  const double gb = static_cast<double>(size) / 1e9;
  std::printf("{\"mode\":\"write\",\"backend\":\"%s\",\"bytes\":%zu,\"iters\":%d,\"xfer_gbps_mean\":%.3f,\"xfer_gbps_best\":%.3f,"
              "\"memcpy_gbps_mean\":%.3f,\"memcpy_gbps_best\":%.3f,\"ratio_mean\":%.3f}\n",
              backend_name(backend), size, iters, gb * iters / xfer_sum, gb / xfer_best, gb * iters / copy_sum, gb / copy_best,
              copy_sum / xfer_sum);
  agent.reset();
  stop(target);
  return 0;
}

int run_small(BackendKind backend, std::size_t size, double seconds, int inflight) {
  Target target = spawn_target(backend, size * static_cast<std::size_t>(inflight));
  std::vector<std::uint8_t> src(size * static_cast<std::size_t>(inflight), 2);
  auto agent = Agent::create({.name = "bench", .backend = backend});
  if (!agent->register_memory(src.data(), src.size())) return 1;
  auto remote = agent->add_remote(target.metadata).value();
  std::vector<XferHandle> slots(static_cast<std::size_t>(inflight));
  auto post = [&](int i) {
    const std::uint64_t off = static_cast<std::uint64_t>(i) * size;
    slots[static_cast<std::size_t>(i)] =
        agent->post(Op::kWrite, {{reinterpret_cast<std::uint64_t>(src.data()) + off, size, 0}}, remote, {{target.base + off, size, 0}})
            .value();
  };
  for (int i = 0; i < inflight; ++i) post(i);
  std::uint64_t done = 0;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  // The window slides in posting order: wait (sleeping, not spinning: the workers need the
  // cores) for the oldest, then post its replacement.
  while (Clock::now() < end) {
    for (int i = 0; i < inflight; ++i) {
      const XferStatus s = agent->wait(slots[static_cast<std::size_t>(i)], std::chrono::seconds(10));
      if (s.state != XferState::kDone) {
        std::fprintf(stderr, "transfer failed: %s\n", s.reason.c_str());
        return 1;
      }
      (void)agent->release(slots[static_cast<std::size_t>(i)]);
      ++done;
      post(i);
    }
  }
  const double elapsed = seconds_since(t0);
  std::printf("{\"mode\":\"small\",\"backend\":\"%s\",\"bytes\":%zu,\"inflight\":%d,\"seconds\":%.2f,\"transfers_per_s\":%.0f}\n",
              backend_name(backend), size, inflight, elapsed, static_cast<double>(done) / elapsed);
  agent.reset();
  stop(target);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s write BACKEND SIZE ITERS | small BACKEND SIZE SECONDS INFLIGHT\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const BackendKind backend = parse_backend(argv[2]);
  const std::size_t size = std::stoull(argv[3]);
  if (mode == "write") return run_write(backend, size, std::stoi(argv[4]));
  if (mode == "small" && argc >= 6) return run_small(backend, size, std::stod(argv[4]), std::stoi(argv[5]));
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
