// A soak of sessions: 16 peers in 4 processes exchange checksummed messages of random sizes
// (0 to 4 MiB) and tags while the test SIGKILLs and restarts processes. Every message must be
// delivered once, in order per (peer, tag), or fail with an error; no send may hang; RSS stays
// flat. 30 s in CI (12 s under sanitizers); WCOMM_SOAK_SECONDS=600 (scripts/test.sh with
// WCOMM_LONG_TESTS=1) for 10 min.
//
// Each process is this test binary again, running CommSoak.Role, which skips unless started so.
// Processes log what they send and receive, one line per event, written at once (a killed
// process's log is complete up to its death); the test checks the logs afterwards.
#include <sys/resource.h>

#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "comm_fixture.h"
#include "sanitized.h"
#include "process_util.h"

namespace wcomm::testing {
namespace {

constexpr int kProcesses = 4;
constexpr int kNodesPerProcess = 4;
constexpr int kNodes = kProcesses * kNodesPerProcess;
constexpr int kTags = 4;
constexpr std::size_t kWindow = 4;  // sends in flight per node
// Each node sends at most one message per pause: the soak is about churn, not speed, and it
// leaves the CPUs to the tests ctest runs beside it.
constexpr auto kPause = std::chrono::milliseconds(4);

std::string node_name(int n) { return "node-" + std::to_string(n); }

// FNV-1a over 8-byte words (then the tail's bytes): enough to catch a wrong or shifted byte.
std::uint64_t checksum(const std::uint8_t* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}
// Pseudo-random bytes (xorshift64).
void fill(std::uint8_t* data, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed | 1;
  for (std::size_t i = 0; i < n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(data + i, &x, std::min<std::size_t>(8, n - i));
  }
}

// One line per event, each written through to the file at once.
class Log {
 public:
  explicit Log(const std::filesystem::path& path) : file_(std::fopen(path.c_str(), "w")) {}
  ~Log() { std::fclose(file_); }
  template <class... A>
  void line(const char* format, A... args) {
    std::lock_guard lock(mu_);
    std::fprintf(file_, format, args...);
    std::fputc('\n', file_);
    std::fflush(file_);
  }

 private:
  std::mutex mu_;
  std::FILE* file_;
};

long rss_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

struct RoleEnv {
  std::filesystem::path dir;
  int process = 0;
  int incarnation = 0;
  std::chrono::system_clock::time_point until;
  std::vector<std::uint16_t> ports;
};

std::optional<RoleEnv> role_env() {
  const char* dir = std::getenv("WCOMM_SOAK_DIR");
  if (!dir) return std::nullopt;
  RoleEnv env;
  env.dir = dir;
  env.process = std::atoi(std::getenv("WCOMM_SOAK_PROCESS"));
  env.incarnation = std::atoi(std::getenv("WCOMM_SOAK_INCARNATION"));
  env.until = std::chrono::system_clock::time_point(std::chrono::milliseconds(std::atoll(std::getenv("WCOMM_SOAK_UNTIL_MS"))));
  std::ifstream ports(env.dir / "ports");
  for (int port; ports >> port;) env.ports.push_back(static_cast<std::uint16_t>(port));
  return env;
}

// Receives every (peer, tag) of one node with a chain of recvs, each re-armed by the last.
class Receiver {
 public:
  Receiver(std::shared_ptr<Comm> comm, int node, Log& log) : comm_(std::move(comm)), node_(node), log_(log) {}
  void start() {
    for (const Peer& p : comm_->peers())
      for (int tag = 1; tag <= kTags; ++tag) arm(&comm_->peer(p.node_id), tag);  // the Comm's own, lasting
  }

 private:
  void arm(const Peer* peer, int tag) {
    comm_->recv(*peer, {.tag = static_cast<std::uint32_t>(tag)}).then([this, peer, tag](Result<Received> r) {
      if (!r.ok()) {
        if (r.error().code != ErrorCode::kClosed) arm(peer, tag);  // the peer went down; it may come back
        return;
      }
      check(*peer, tag, r.value().value);
      arm(peer, tag);
    });
  }
  void check(const Peer& peer, int tag, const Value& v) {
    const auto& f = v.as<List>().items;
    const auto num = [&](int i) { return f[i].is<std::uint64_t>() ? f[i].as<std::uint64_t>() : std::uint64_t(f[i].as<std::int64_t>()); };
    const Tensor& t = f[6].as<Tensor>();
    const bool ok = node_name(int(num(0))) == peer.node_id && int(num(2)) == node_ && int(num(3)) == tag &&
                    checksum(t.data(), t.nbytes()) == num(5);
    log_.line("R %d %d %d %d %llu %s", int(num(0)), int(num(1)), int(num(2)), int(num(3)),
              static_cast<unsigned long long>(num(4)), ok ? "ok" : "bad");
  }

  std::shared_ptr<Comm> comm_;
  int node_;
  Log& log_;
};

// One node's sender: random peers, tags and sizes, kWindow sends in flight, acknowledged.
void send_until(Comm& comm, int node, const RoleEnv& env, Log& log) {
  std::mt19937_64 rng(std::random_device{}());
  std::map<std::pair<int, int>, std::uint64_t> next_seq;
  struct InFlight {
    int dst, tag;
    std::uint64_t seq;
    Future<SendResult> done;
  };
  std::deque<InFlight> window;
  const auto settle = [&] {
    InFlight f = std::move(window.front());
    window.pop_front();
    Result<SendResult>* r = f.done.wait_for(std::chrono::seconds(60));
    log.line("O %d %d %d %d %llu %s", node, env.incarnation, f.dst, f.tag, static_cast<unsigned long long>(f.seq),
             !r ? "hang" : r->ok() ? "ok" : error_code_name(r->error().code));
  };
  while (std::chrono::system_clock::now() < env.until) {
    int dst = int(rng() % (kNodes - 1));
    dst += dst >= node;
    const int tag = 1 + int(rng() % kTags);
    const double pick = std::uniform_real_distribution<double>(0, 1)(rng);
    const std::size_t size = rng() % (pick < 0.8 ? 4096 : pick < 0.95 ? (256u << 10) : (4u << 20) + 1);
    const std::uint64_t seq = next_seq[{dst, tag}]++;
    Tensor t = Tensor::empty(DType::kUInt8, {std::int64_t(size)});
    fill(t.data(), size, rng());
    Value v(List{node, env.incarnation, dst, tag, seq, checksum(t.data(), size), std::move(t)});
    log.line("S %d %d %d %d %llu", node, env.incarnation, dst, tag, static_cast<unsigned long long>(seq));
    window.push_back({dst, tag, seq,
                      comm.send(std::move(v), comm.peer(node_name(dst)), {},
                                {.tag = std::uint32_t(tag), .timeout = 10s, .ack = true})});
    if (window.size() >= kWindow) settle();
    std::this_thread::sleep_for(kPause);
  }
  while (!window.empty()) settle();
}

TEST(CommSoak, Role) {
  auto env = role_env();
  if (!env) GTEST_SKIP() << "one process of CommSoak.SixteenPeersInFourProcessesWithRestarts";
  ASSERT_EQ(env->ports.size(), std::size_t(kNodes));
  Log log(env->dir / fmt::format("p{}-i{}.log", env->process, env->incarnation));
  CommConfig config;
  config.heartbeat_interval_s = 0.5;
  config.connect_timeout_s = 5;
  std::vector<std::shared_ptr<Comm>> comms;
  std::vector<std::unique_ptr<Receiver>> receivers;
  for (int i = 0; i < kNodesPerProcess; ++i) {
    const int node = env->process * kNodesPerProcess + i;
    std::vector<Peer> peers;
    for (int n = 0; n < kNodes; ++n)
      if (n != node) peers.push_back({node_name(n), "127.0.0.1", env->ports[n]});
    comms.push_back(Comm::create({{node_name(node), "127.0.0.1", env->ports[node]}, peers, "127.0.0.1", config}));
    receivers.push_back(std::make_unique<Receiver>(comms.back(), node, log));
    receivers.back()->start();
  }
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      log.line("M %ld", rss_kb());
      std::this_thread::sleep_for(1s);  // a sampling period, not a synchronisation
    }
  });
  std::vector<std::thread> senders;
  for (int i = 0; i < kNodesPerProcess; ++i)
    senders.emplace_back([&, i] { send_until(*comms[i], env->process * kNodesPerProcess + i, *env, log); });
  for (auto& s : senders) s.join();
  // Every process stops sending at the same moment; what is still on its way arrives meanwhile.
  std::this_thread::sleep_for(3s);
  sampling = false;
  sampler.join();
  for (auto& c : comms) c->close();
  log.line("DONE");
}

using Key = std::tuple<int, int, int, int, std::uint64_t>;  // src, incarnation, dst, tag, seq

struct Logs {
  std::set<Key> started, acked, received;
  std::map<Key, std::string> failed;  // with the error's name
  std::map<std::string, int> failures_by_code;
  std::vector<std::string> problems;
  std::vector<long> rss_kb_p0;
};

void read_log(const std::filesystem::path& path, Logs& logs) {
  std::ifstream in(path);
  const std::string name = path.filename().string();
  const bool process0 = name.rfind("p0-", 0) == 0;
  std::set<Key> started_here, settled_here;
  std::map<std::tuple<int, int, int, int>, std::uint64_t> last_seq;  // receiver order per stream
  bool done = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream s(line);
    std::string kind, status;
    int src = 0, inc = 0, dst = 0, tag = 0;
    std::uint64_t seq = 0;
    s >> kind;
    if (kind == "DONE") done = true;
    if (kind == "M" && process0) logs.rss_kb_p0.push_back(std::stol(line.substr(2)));
    if (kind != "S" && kind != "O" && kind != "R") continue;
    s >> src >> inc >> dst >> tag >> seq >> status;
    const Key key{src, inc, dst, tag, seq};
    if (kind == "S") {
      logs.started.insert(key);
      started_here.insert(key);
    } else if (kind == "O") {
      settled_here.insert(key);
      if (status == "ok") logs.acked.insert(key);
      else if (status == "hang") logs.problems.push_back(name + ": a send never completed: " + line);
      else {
        logs.failed[key] = status;
        ++logs.failures_by_code[status];
      }
    } else {
      if (status != "ok") logs.problems.push_back(name + ": a message arrived corrupted: " + line);
      if (!logs.received.insert(key).second) logs.problems.push_back(name + ": delivered twice: " + line);
      auto [it, fresh] = last_seq.try_emplace({src, inc, dst, tag}, seq);
      if (!fresh && seq <= it->second) logs.problems.push_back(name + ": out of order: " + line);
      it->second = seq;
    }
  }
  if (done && started_here != settled_here)
    logs.problems.push_back(name + ": " + std::to_string(started_here.size() - settled_here.size()) +
                            " sends started and never completed");
}

TEST(CommSoak, SixteenPeersInFourProcessesWithRestarts) {
  const char* seconds_env = std::getenv("WCOMM_SOAK_SECONDS");
  const auto run_for = std::chrono::seconds(seconds_env ? std::atoi(seconds_env) : kSanitized ? 12 : 30);
  TempDir dir;
  {
    std::ofstream ports(dir.path() / "ports");
    for (auto port : free_tcp_ports(kNodes)) ports << port << "\n";
  }
  const auto until = std::chrono::system_clock::now() + run_for;
  const auto until_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until.time_since_epoch()).count();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto spawn = [&](int p, int inc) {
    const std::string name = fmt::format("p{}-i{}", p, inc);
    return Process::spawn({"env", "WCOMM_SOAK_DIR=" + dir.path().string(), "WCOMM_SOAK_PROCESS=" + std::to_string(p),
                           "WCOMM_SOAK_INCARNATION=" + std::to_string(inc), "WCOMM_SOAK_UNTIL_MS=" + std::to_string(until_ms),
                           self, "--gtest_filter=CommSoak.Role"},
                          dir.path(), name);
  };
  std::vector<Process> processes;
  std::vector<int> incarnations(kProcesses, 0);
  for (int p = 0; p < kProcesses; ++p) processes.push_back(spawn(p, 0));
  // Processes 1 to 3 are killed and restarted at random; process 0 never is, so what its
  // nodes acknowledged can be checked against what they logged.
  std::mt19937 rng(std::random_device{}());
  int restarts = 0;
  while (std::chrono::system_clock::now() + 6s < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2000 + rng() % 3000));  // the restart pace
    const int p = 1 + int(rng() % (kProcesses - 1));
    ASSERT_TRUE(processes[p].kill().has_value());
    processes[p] = spawn(p, ++incarnations[p]);
    ++restarts;
  }
  for (int p = 0; p < kProcesses; ++p) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::system_clock::now());
    auto rc = processes[p].wait_for(std::max(left, std::chrono::milliseconds(0)) + 90s);
    ASSERT_EQ(rc, 0) << "process " << p << ":\n" << processes[p].output();
  }

  Logs logs;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    if (entry.path().extension() == ".log") read_log(entry.path(), logs);
  for (const auto& key : logs.received)
    if (!logs.started.count(key)) logs.problems.push_back("received a message no sender logged");
  std::size_t acked_to_p0 = 0;
  for (const auto& key : logs.acked)
    if (std::get<2>(key) < kNodesPerProcess) {
      ++acked_to_p0;
      if (!logs.received.count(key)) logs.problems.push_back("acknowledged by process 0 but never received there");
    }
  std::size_t delivered_after_failure = 0;
  for (const auto& [key, code] : logs.failed) {
    delivered_after_failure += logs.received.count(key);
    // Process 0 lives throughout: an ACK it sent can be lost only with its connection.
    if (std::get<2>(key) < kNodesPerProcess && code == "OperationTimeoutError" && logs.received.count(key))
      logs.problems.push_back("received by process 0, yet its send timed out waiting for the ACK");
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(logs.problems.size(), 20); ++i) ADD_FAILURE() << logs.problems[i];
  EXPECT_GT(acked_to_p0, 100u) << "too little traffic to say anything";

  // RSS of process 0: the second half of the run peaks no higher than the first (with slack).
  const auto& rss = logs.rss_kb_p0;
  const std::size_t half = rss.size() / 2;
  const long first = half ? *std::max_element(rss.begin(), rss.begin() + half) : 0;
  const long second = half ? *std::max_element(rss.begin() + half, rss.end()) : 0;
  EXPECT_LE(second, first * 3 / 2 + 64 * 1024) << "process 0's RSS grew: " << first << " kB, then " << second << " kB";

  std::string codes;
  for (const auto& [code, n] : logs.failures_by_code) codes += " " + code + "=" + std::to_string(n);
  std::printf("soak: %lld s, %d restarts; %zu sends: %zu acknowledged, %zu failed (%s), %zu received (%zu of them "
              "after their send failed); process 0 RSS peak %ld kB then %ld kB\n",
              static_cast<long long>(run_for.count()), restarts, logs.started.size(), logs.acked.size(),
              logs.failed.size(), codes.empty() ? "none" : codes.c_str() + 1, logs.received.size(),
              delivered_after_failure, first, second);
}

}  // namespace
}  // namespace wcomm::testing
