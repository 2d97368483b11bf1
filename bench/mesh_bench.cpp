// mesh_bench: the entity mesh's speed from C++, two entities in two processes.
//   mesh_bench rate BACKEND PROTOCOL N       small messages one way: messages per second
//   mesh_bench rtt  BACKEND PROTOCOL ROUNDS  ping-pong of a small message: p50 / p99 in us
// BACKEND zmq | wcomm; PROTOCOL IPC | TCP | SHM. Messages are {"seq": i} dicts, pickled (the
// codec a pyzmq mesh uses; 16 bytes on the wire). bench/mesh_bench.py runs it beside pyzmq.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/mesh/wcomm_communicator.h"
#include "wcomm/mesh/zmq_communicator.h"

using namespace wcomm;
using namespace wcomm::mesh;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<Communicator> make(const std::string& backend, CommProtocol protocol, const std::string& prefix,
                                   const std::string& me, const std::string& peer) {
  if (backend == "zmq") return std::make_unique<ZmqCommunicator>(me, std::vector<std::string>{peer},
                                                                 ZmqOptions{.protocol = protocol, .ipc_socket_path_prefix = prefix});
  return std::make_unique<WcommCommunicator>(me, std::vector<std::string>{peer},
                                             WcommOptions{.protocol = protocol, .ipc_socket_path_prefix = prefix});
}

std::int64_t seq_of(const Value& v) {
  const Value* s = v.is<Dict>() ? v.as<Dict>().find("seq") : nullptr;
  return s && s->is<std::int64_t>() ? s->as<std::int64_t>() : -1;
}

// Blocks until one message arrives (the readiness handshakes).
Value next(Communicator& c) {
  while (true) {
    auto got = c.get_all_new_messages(true, 30.0);
    if (!got.empty()) return got.front();
  }
}

int peer_process(const std::string& mode, const std::string& backend, CommProtocol protocol, const std::string& prefix,
                 long n) {
  auto c = make(backend, protocol, prefix, "worker_1", "worker_0");
  c->send("worker_0", Dict{{"seq", -2}});  // ready
  if (mode == "rate") {
    long got = 0;
    while (got < n) got += static_cast<long>(c->get_all_new_bytes(true, 30.0).size());
    c->send("worker_0", Dict{{"seq", got}});
  } else {
    for (long i = 0; i < n; ++i) {
      const std::string ping = [&] {
        while (true) {
          auto got = c->get_all_new_bytes(true, 30.0);
          if (!got.empty()) return got.front();
        }
      }();
      c->send_bytes("worker_0", ping);
    }
  }
  next(*c);  // the driver's goodbye, so nothing is dropped by closing first
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: mesh_bench rate|rtt zmq|wcomm IPC|TCP|SHM N\n");
    return 2;
  }
  const std::string mode = argv[1], backend = argv[2];
  const CommProtocol protocol = parse_protocol(argv[3]);
  const long n = std::atol(argv[4]);
  char tmpl[] = "/tmp/mesh-bench-XXXXXX";
  const std::string prefix = std::string(mkdtemp(tmpl)) + "/";
  const pid_t child = fork();
  if (child == 0) _exit(peer_process(mode, backend, protocol, prefix, n));

  int rc = 0;
  {
    auto c = make(backend, protocol, prefix, "worker_0", "worker_1");
    next(*c);  // the peer is up
    const Value small = Dict{{"seq", 1}};
    if (mode == "rate") {
      const std::string encoded = c->codec().encode(small);
      const auto start = Clock::now();
      for (long i = 0; i < n; ++i) c->send("worker_1", Dict{{"seq", i}});  // encoded each time, as a caller would
      const long got = seq_of(next(*c));
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      std::printf("mesh_bench rate backend=%s protocol=%s n=%ld msgs_per_s=%.0f bytes=%zu\n", backend.c_str(),
                  argv[3], got, n / s, encoded.size());
    } else {
      std::vector<double> us;
      us.reserve(static_cast<std::size_t>(n));
      for (long i = 0; i < n; ++i) {
        const auto t = Clock::now();
        c->send("worker_1", small);
        while (c->get_all_new_bytes(true, 30.0).empty()) {
        }
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      }
      std::sort(us.begin(), us.end());
      std::printf("mesh_bench rtt backend=%s protocol=%s rounds=%ld p50_us=%.1f p99_us=%.1f\n", backend.c_str(),
                  argv[3], n, us[us.size() / 2], us[us.size() * 99 / 100]);
    }
    c->send("worker_1", Dict{{"seq", -3}});  // goodbye
    int status = 0;
    waitpid(child, &status, 0);
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  std::filesystem::remove_all(prefix);
  return rc;
}
