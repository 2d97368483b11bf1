// A randomized fault test of Comm's delivery semantics (docs/cpp-api.md, "Delivery"; issue 27).
// Three nodes, each its own process, send each other numbered, checksummed messages of random
// sizes, tags, priorities, timeouts and cancels, acknowledged or not, while the test kills and
// restarts peers, stops them (some past the heartbeat limit) and breaks, stalls, slows and
// silences their connections with fault proxies. Afterwards the logs must show:
//   - no message delivered twice, none corrupted, and per (sender, receiver, tag) in order;
//   - a send that failed for certain (any error but DeliveryUnknown) was not delivered;
//   - an acknowledged send was delivered (unless its receiver was killed after it was sent:
//     the dead process may have had it queued, unread);
//   - every send completed (unless its sender was killed first), and n0's (its process is
//     never stopped) no later than its timeout allows.
// Allowed either way: a send that completed without ack (it was only handed to the kernel, so
// a broken connection may lose it), an acked send that failed with DeliveryUnknown (it went
// out whole, its ACK never came), a send whose sender was killed before it completed; each
// still at most once.
// Retries (CommOptions::retry_key): an acked send carries a key, and one that fails with
// DeliveryUnknown is sent again with the same key, up to 3 times, as an application would.
// Such a message is delivered at most once per receiver incarnation (a restarted receiver
// no longer knows the keys), and once if a try was acknowledged; it is exempt from the order
// check (a retry is a later send), and a try that failed for certain says nothing of the
// earlier ones.
//
// n0 is this test process; n1 and n2 are this binary again, running CommRandomFaults.PeerRole
// (which skips unless started so). n0 reaches n1 and n2 over TCP through FaultProxy (one proxy
// per dialing side), n1 and n2 each other over a Unix socket or shared memory (by seed). Each
// node logs every event as one line written at once with O_APPEND: what a killed process had
// logged survives it, and its next incarnation appends to the same file.
//
// Seeds: CommRandomFaults.Seed1..4 run fixed seeds (odd ones link n1 and n2 by shm). With WCOMM_LONG_TESTS=1,
// CommRandomFaults.FreshSeeds runs fresh seeds (printed) for about 85 s (WCOMM_FAULT_BUDGET_S
// seconds); WCOMM_FAULT_SEED=N makes it replay seed N. A seed fixes the fault schedule and every
// node's traffic, not the timing: a replay meets the same faults, not the same interleaving.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "comm_fixture.h"
#include "fault_proxy.h"
#include "process_util.h"
#include "sanitized.h"

namespace wcomm::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kNodes = 3;
constexpr int kTags = 3;
// Heartbeats every 0.2 s: a peer stopped for more than 0.6 s is declared dead, and the stops
// below last 50 ms to 1.5 s, so some pass the limit and some do not. 0.5 s under sanitizers,
// where two loaded cores may not answer within 0.6 s.
const double kHeartbeatS = kSanitized ? 0.5 : 0.2;
constexpr std::uint64_t kChunkBytes = 64 << 10;  // messages reach 700 KiB: chunked over TCP
constexpr std::size_t kWindow = 8;               // sends in flight per node
const auto kFaultTime = std::chrono::seconds(6);       // per fixed seed
const auto kLongFaultTime = std::chrono::seconds(20);  // per fresh seed (WCOMM_LONG_TESTS=1)
// How long the logs must stay quiet, once everyone has stopped sending, before a receiver
// takes it that nothing more is on its way.
const milliseconds kQuiet(kSanitized ? 2500 : 1000);
// How long a send may still complete after its timeout (n0's loop under load), before the
// check calls it late.
const milliseconds kTimeoutSlack(kSanitized ? 10000 : 2000);

std::string node_name(int n) { return "n" + std::to_string(n); }

// steady_clock is CLOCK_MONOTONIC, one clock for every process on the host: times logged by
// different processes compare.
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// FNV-1a over 8-byte words (then the tail's bytes): enough to catch a wrong or shifted byte.
std::int64_t checksum(const std::uint8_t* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return static_cast<std::int64_t>(h & INT64_MAX);  // fits a Value's int64
}

// Pseudo-random bytes (xorshift64): compression cannot shrink them.
void fill(std::uint8_t* data, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed | 1;
  for (std::size_t i = 0; i < n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(data + i, &x, std::min<std::size_t>(8, n - i));
  }
}

// One line per event, each handed to the kernel at once with O_APPEND (one write() per line:
// lines of several threads, and of a process and its next incarnation, never mix).
class Log {
 public:
  explicit Log(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw std::runtime_error("open " + path.string() + ": " + std::strerror(errno));
  }
  ~Log() { ::close(fd_); }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  void line(std::string text) {
    for (char& c : text)
      if (c == '\n') c = ' ';
    text += '\n';
    std::lock_guard lock(mu_);
    if (::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      std::fprintf(stderr, "log write failed: %s\n", std::strerror(errno));
  }

 private:
  std::mutex mu_;
  int fd_;
};

// Where every node listens and which port each dials for each other (written by the test,
// read by the peer processes).
struct Plan {
  std::uint16_t listen[kNodes] = {};
  std::uint16_t route[kNodes][kNodes] = {};  // route[i][j]: the port node i dials for node j
  std::string link12 = "unix";               // n1 <-> n2: "unix", or "auto" (shared memory)

  void save(const std::filesystem::path& path) const {
    std::ofstream out(path);
    out << link12 << "\n";
    for (int i = 0; i < kNodes; ++i) {
      out << listen[i];
      for (int j = 0; j < kNodes; ++j) out << " " << route[i][j];
      out << "\n";
    }
  }
  static Plan load(const std::filesystem::path& path) {
    Plan p;
    std::ifstream in(path);
    in >> p.link12;
    for (int i = 0; i < kNodes; ++i) {
      in >> p.listen[i];
      for (int j = 0; j < kNodes; ++j) in >> p.route[i][j];
    }
    return p;
  }
};

CommSpec spec_of(const Plan& plan, int self) {
  CommConfig c;
  c.heartbeat_interval_s = kHeartbeatS;
  c.connect_timeout_s = 5;
  c.chunk_bytes = kChunkBytes;
  // Small queue bounds, so sends also wait for capacity (and a few fail with backpressure).
  c.max_peer_queued_messages = 64;
  c.max_peer_queued_bytes = 4 << 20;
  c.transport = self == 0 ? "tcp" : plan.link12;
  std::vector<Peer> peers;
  for (int j = 0; j < kNodes; ++j) {
    if (j == self) continue;
    Peer p{node_name(j), "127.0.0.1", plan.route[self][j]};
    p.transport = self == 0 || j == 0 ? "tcp" : plan.link12;  // only TCP goes through a proxy
    peers.push_back(p);
  }
  return {{node_name(self), "127.0.0.1", plan.listen[self]}, peers, "127.0.0.1", c};
}

// "src inc dst tag seq": a message's name in every log line.
std::string key_text(int src, int inc, int dst, int tag, std::uint64_t seq) {
  return fmt::format("{} {} {} {} {}", src, inc, dst, tag, seq);
}

// A message: who sent it to whom on which tag, its number, and the checksum of its payload.
Value make_message(int src, int inc, int dst, int tag, std::uint64_t seq, std::size_t size, std::uint64_t seed) {
  Buffer payload = Buffer::allocate(size);
  fill(payload.data(), size, seed);
  const std::int64_t crc = checksum(payload.data(), size);
  return Value(Dict{{"src", src}, {"inc", inc}, {"dst", dst}, {"tag", tag}, {"seq", seq}, {"crc", crc},
                    {"payload", Bytes(std::move(payload))}});
}

// Sends random messages to the other nodes, kWindow at a time, until stop; then waits for
// every send to complete. Logs "S key ack size timeout_ms priority start_ns" before each
// send, "R key ok|err|hang code cancelled end_ns message" once it completed (or not), and
// "X node inc" when all did.
void send_until_stopped(Comm& comm, int self, int inc, std::uint64_t seed, Log& log, const std::atomic<bool>& stop) {
  std::mt19937_64 rng(seed * 1000003 + self * 1009 + inc);
  const auto uniform = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  const auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  std::map<std::pair<int, int>, std::uint64_t> next_seq;  // by (dst, tag)
  struct InFlight {
    std::string key;
    Clock::time_point cancel_at;
    bool cancelled = false;
    Future<SendResult> done;
    int dst = 0;
    Value message;          // kept for a retry (acked sends only)
    CommOptions options;
    int tries = 1;
  };
  std::deque<InFlight> window;
  const auto log_result = [&](const InFlight& f, const Result<SendResult>* r) {
    const std::string outcome = !r ? "hang -" : r->ok() ? "ok -" : fmt::format("err {}", error_code_name(r->error().code));
    log.line(fmt::format("R {} {} {} {} {}", f.key, outcome, int(f.cancelled), now_ns(), r && !r->ok() ? r->error().message : "-"));
  };
  const auto poll = [&] {
    for (auto it = window.begin(); it != window.end();) {
      if (it->done.ready()) {
        const Result<SendResult>& r = it->done.wait();
        if (!r.ok() && r.error().code == ErrorCode::kDeliveryUnknown && it->options.retry_key && it->tries < 3 && !stop) {
          // The outcome is unknown: the same message again, with the same retry key.
          log.line(fmt::format("Y {} {}", it->key, now_ns()));
          it->done = comm.send(it->message, comm.peer(node_name(it->dst)), {}, it->options);
          it->tries += 1;
          it->cancelled = false;
          it->cancel_at = Clock::time_point::max();
          ++it;
          continue;
        }
        log_result(*it, &r);
        it = window.erase(it);
        continue;
      }
      if (!it->cancelled && Clock::now() >= it->cancel_at) {
        it->done.cancel();
        it->cancelled = true;
      }
      ++it;
    }
  };
  while (!stop) {
    poll();
    if (window.size() >= kWindow) {
      std::this_thread::sleep_for(milliseconds(1));  // a bounded poll of the window
      continue;
    }
    int dst = int(uniform(0, kNodes - 2));
    dst += dst >= self;
    const int tag = int(uniform(1, kTags));
    const std::uint64_t seq = next_seq[{dst, tag}]++;
    // Sizes from 0 to 700 KiB; one in ten above 256 KiB, many above chunk_bytes.
    const double pick = std::uniform_real_distribution<double>(0, 1)(rng);
    const std::size_t size = pick < 0.05   ? 0
                             : pick < 0.4  ? uniform(1, 1024)
                             : pick < 0.7  ? uniform(1024, 64 << 10)
                             : pick < 0.9  ? uniform(64 << 10, 256 << 10)
                                           : uniform(256 << 10, 700 << 10);
    // Timeouts: some so short that the send times out queued or mid-write; some none.
    const double t = std::uniform_real_distribution<double>(0, 1)(rng);
    const std::int64_t timeout_ms = t < 0.15 ? uniform(1, 50) : t < 0.5 ? uniform(50, 500) : t < 0.85 ? uniform(500, 3000) : -1;
    CommOptions options;
    options.tag = std::uint32_t(tag);
    if (timeout_ms >= 0) options.timeout = Seconds(timeout_ms / 1000.0);
    options.ack = chance(0.5);
    options.wait_for_capacity = !chance(0.05);
    // Other priorities reorder messages across tags, never within one.
    const double p = std::uniform_real_distribution<double>(0, 1)(rng);
    options.priority = p < 0.7 ? Priority::kAuto : p < 0.8 ? Priority::kHigh : p < 0.9 ? Priority::kNormal : Priority::kBulk;
    const std::string key = key_text(self, inc, dst, tag, seq);
    Value message = make_message(self, inc, dst, tag, seq, size, rng());
    log.line(fmt::format("S {} {} {} {} {} {}", key, int(options.ack), size, timeout_ms, int(options.priority), now_ns()));
    InFlight f;
    f.key = key;
    f.cancel_at = Clock::time_point::max();
    f.dst = dst;
    if (options.ack) {
      options.retry_key = std::hash<std::string>{}(key);  // one per message, the same for its retries
      f.message = message;
      f.options = options;
    }
    f.done = comm.send(std::move(message), comm.peer(node_name(dst)), {}, options);
    // Some sends are cancelled: at once (racing the loop's first write of it) or a little later.
    if (chance(0.04)) {
      f.done.cancel();
      f.cancelled = true;
    } else if (chance(0.04)) {
      f.cancel_at = Clock::now() + milliseconds(uniform(0, 30));
    }
    window.push_back(std::move(f));
    std::this_thread::sleep_for(milliseconds(kSanitized ? uniform(2, 12) : uniform(0, 3)));  // the traffic's pace
  }
  // Every send must complete: those with no timeout within a moment of the peers being back.
  const auto limit = Clock::now() + std::chrono::seconds(kSanitized ? 60 : 40);
  while (!window.empty() && Clock::now() < limit) {
    poll();
    std::this_thread::sleep_for(milliseconds(2));  // a bounded poll of the window
  }
  for (const auto& f : window) log_result(f, nullptr);
  log.line(fmt::format("X {} {}", self, inc));
}

// One receiver thread per (peer, tag): recvs with a short timeout, checks each message and
// logs "D key ok|bad receiver_inc ns" at once (so a kill loses at most what was not yet
// recv'd). "E text" lines are problems the check reports.
class Receivers {
 public:
  Receivers(Comm& comm, int self, int inc, Log& log) : comm_(comm), self_(self), inc_(inc), log_(log) {
    for (int src = 0; src < kNodes; ++src)
      for (int tag = 1; tag <= kTags && src != self; ++tag) threads_.emplace_back([this, src, tag] { run(src, tag); });
  }
  ~Receivers() { quit(); }
  std::int64_t last_message_ns() const { return last_ns_.load(); }
  void quit() {
    quit_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void run(int src, int tag) {
    const Peer& peer = comm_.peer(node_name(src));
    while (!quit_) {
      Future<Received> f = comm_.recv(peer, {.tag = std::uint32_t(tag), .timeout = Seconds(0.2)});
      Result<Received>* r = f.wait_for(std::chrono::seconds(10));
      if (!r) {
        log_.line(fmt::format("E {}: a recv from {} on tag {} with a 0.2 s timeout had not completed after 10 s",
                              node_name(self_), node_name(src), tag));
        f.cancel();
        continue;
      }
      if (r->ok()) {
        check(src, tag, r->value().value);
        continue;
      }
      switch (r->error().code) {
        case ErrorCode::kOperationTimeout: break;
        case ErrorCode::kClosed: return;
        case ErrorCode::kConnectionClosed:
        case ErrorCode::kPeerRestarted:
        case ErrorCode::kConnectionFailed:
          std::this_thread::sleep_for(milliseconds(10));  // the peer is down: it may come back
          break;
        default:
          log_.line(fmt::format("E {}: a recv from {} on tag {} failed with {}: {}", node_name(self_), node_name(src),
                                tag, error_code_name(r->error().code), r->error().message));
      }
    }
  }

  void check(int src, int tag, const Value& v) {
    last_ns_ = now_ns();
    const Dict* d = v.get_if<Dict>();
    const auto num = [&](const char* name) -> std::int64_t {
      const Value* x = d ? d->find(name) : nullptr;
      return x && x->is<std::int64_t>() ? x->as<std::int64_t>() : -1;
    };
    const Value* payload = d ? d->find("payload") : nullptr;
    if (!payload || !payload->is<Bytes>() || num("seq") < 0) {
      log_.line(fmt::format("E {}: from {} on tag {} a message that is not one of the test's: {}", node_name(self_),
                            node_name(src), tag, summarize(v)));
      return;
    }
    const Buffer& b = payload->as<Bytes>().buffer;
    const std::string key = key_text(int(num("src")), int(num("inc")), int(num("dst")), int(num("tag")), std::uint64_t(num("seq")));
    std::string wrong;
    if (num("src") != src) wrong += fmt::format(" came from {};", node_name(src));
    if (num("dst") != self_) wrong += fmt::format(" arrived at {};", node_name(self_));
    if (num("tag") != tag) wrong += fmt::format(" arrived on tag {};", tag);
    if (checksum(b.data(), b.size()) != num("crc")) wrong += fmt::format(" its {} payload bytes fail their checksum;", b.size());
    log_.line(fmt::format("D {} {} {} {}", key, wrong.empty() ? "ok" : "bad", inc_, now_ns()));
    if (!wrong.empty()) log_.line(fmt::format("E {}: message {}:{}", node_name(self_), key, wrong));
  }

  Comm& comm_;
  const int self_, inc_;
  Log& log_;
  std::atomic<bool> quit_{false};
  std::atomic<std::int64_t> last_ns_{now_ns()};
  std::vector<std::thread> threads_;
};

// One node: its Comm, sender and receivers, logging to dir/n<self>.log.
class Node {
 public:
  Node(const Plan& plan, int self, int inc, std::uint64_t seed, const std::filesystem::path& dir)
      : log_(dir / (node_name(self) + ".log")), comm_(Comm::create(spec_of(plan, self))), receivers_(*comm_, self, inc, log_) {
    log_.line(fmt::format("I {} {} {}", self, inc, ::getpid()));
    sender_ = std::thread([this, self, inc, seed] { send_until_stopped(*comm_, self, inc, seed, log_, stop_); });
  }
  ~Node() {
    stop_sending();
    receivers_.quit();
    comm_->close();
  }
  // Returns once every send has completed (or the sender gave up on it).
  void stop_sending() {
    stop_ = true;
    if (sender_.joinable()) sender_.join();
  }
  // Once every node has stopped sending: receives until nothing came for kQuiet.
  void drain() {
    const auto limit = Clock::now() + std::chrono::seconds(30);
    while (now_ns() - receivers_.last_message_ns() < std::chrono::nanoseconds(kQuiet).count() && Clock::now() < limit)
      std::this_thread::sleep_for(milliseconds(20));  // a bounded poll of the receivers
    receivers_.quit();
  }

 private:
  Log log_;
  std::atomic<bool> stop_{false};
  std::shared_ptr<Comm> comm_;
  Receivers receivers_;
  std::thread sender_;
};

// Waits for a file the test makes to say what comes next; false if the test went away first
// (this process's parent changed) or after limit.
bool wait_for_file(const std::filesystem::path& path, std::chrono::seconds limit) {
  const pid_t parent = ::getppid();
  const auto deadline = Clock::now() + limit;
  while (!std::filesystem::exists(path)) {
    if (::getppid() != parent || Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));  // a bounded poll of the directory
  }
  return true;
}

void touch(const std::filesystem::path& path) { std::ofstream(path) << "\n"; }

// ---------------------------------------------------------------------------------------------
// The check of the logs.

using Key = std::tuple<int, int, int, int, std::uint64_t>;  // src, sender incarnation, dst, tag, seq

struct Send {
  bool ack = false;
  std::uint64_t size = 0;
  std::int64_t timeout_ms = -1;
  int priority = 0;
  std::int64_t start_ns = 0;
  std::string outcome;  // "" (never logged), "ok", "err", "hang"
  std::string code, message;
  bool cancelled = false;
  std::int64_t end_ns = 0;
  std::vector<int> delivered_to;  // the receiver's incarnation, per delivery
  std::int64_t delivered_ns = 0;  // when last delivered
  int retries = 0;                // "Y" lines: sent again with its retry key
};

struct Run {  // what the test did to the processes
  std::int64_t start_ns = now_ns();                    // times in messages count from here
  std::set<std::pair<int, int>> killed;                // (node, incarnation)
  std::map<int, std::vector<std::int64_t>> killed_ns;  // by node: when each kill had taken effect
  std::map<std::string, int> faults;                   // by kind
  std::vector<std::pair<std::int64_t, std::string>> timeline;  // each fault's start and end
  void note(const std::string& kind, const std::string& what) {
    ++faults[kind];
    mark(what);
  }
  void mark(const std::string& what) { timeline.push_back({now_ns(), what}); }
};

// Seconds since the run started, for messages.
std::string at(std::int64_t ns, const Run& run) { return fmt::format("{:.3f} s", (ns - run.start_ns) / 1e9); }

// The faults from one time to another, for a violation's message.
std::string faults_between(std::int64_t from, std::int64_t to, const Run& run) {
  std::string text;
  for (const auto& [ns, what] : run.timeline)
    if (ns >= from && ns <= to) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", at(ns, run), what);
  return fmt::format("; faults from {} to {}: {}", at(from, run), at(to, run), text.empty() ? "none" : text);
}

// "n0->n1 tag 2 seq 24 (n0 incarnation 0; 8080 bytes, ack, timeout 23 ms, priority auto; sent at
// 1.234 s, OperationTimeoutError at 1.260 s)"
std::string describe(const Key& k, const Send& s, const Run& run) {
  const auto& [src, inc, dst, tag, seq] = k;
  static const char* const priorities[] = {"auto", "high", "normal", "bulk"};
  const std::string outcome = s.outcome.empty() ? "no outcome"
                              : s.outcome == "hang" ? "still pending at the end"
                              : fmt::format("{} at {}", s.outcome == "ok" ? "ok" : s.code, at(s.end_ns, run));
  return fmt::format("{}->{} tag {} seq {} ({} incarnation {}; {} bytes, {}, {}, priority {}{}; sent at {}, {})", node_name(src),
                     node_name(dst), tag, seq, node_name(src), inc, s.size, s.ack ? "ack" : "no ack",
                     s.timeout_ms < 0 ? "no timeout" : fmt::format("timeout {} ms", s.timeout_ms),
                     priorities[s.priority & 3], s.cancelled ? ", cancelled" : "", at(s.start_ns, run), outcome);
}

struct Summary {
  int sent = 0, acked = 0, delivered = 0, failed = 0, unknown = 0, unknown_delivered = 0, orphans = 0,
      orphans_delivered = 0, lost_no_ack = 0, lost_receiver_killed = 0, cancels = 0, chunked = 0, retried = 0,
      retried_delivered = 0;
  std::map<std::string, int> failures_by_code;
};

// Reads every node's log and returns the violations (empty: the run kept the contract).
std::vector<std::string> check_logs(const std::filesystem::path& dir, const Run& run, Summary& sum) {
  std::vector<std::string> problems;
  std::map<Key, Send> sends;
  struct Delivery {
    Key key;
    std::string where;  // "n1 incarnation 0 at 2.345 s"
  };
  std::vector<Delivery> deliveries;  // in each receiver's log order
  std::set<std::pair<int, int>> settled;                 // (node, incarnation) that logged X
  for (int n = 0; n < kNodes; ++n) {
    std::ifstream in(dir / (node_name(n) + ".log"));
    for (std::string line; std::getline(in, line);) {
      std::istringstream s(line);
      std::string kind;
      s >> kind;
      if (kind == "E") {
        problems.push_back(line.substr(2));
        continue;
      }
      if (kind == "X") {
        int node = 0, inc = 0;
        s >> node >> inc;
        settled.insert({node, inc});
        continue;
      }
      if (kind != "S" && kind != "R" && kind != "D" && kind != "Y") continue;
      int src = 0, inc = 0, dst = 0, tag = 0;
      std::uint64_t seq = 0;
      s >> src >> inc >> dst >> tag >> seq;
      const Key key{src, inc, dst, tag, seq};
      if (kind == "Y") {
        sends[key].retries += 1;
        continue;
      }
      if (kind == "S") {
        Send& x = sends[key];
        int ack = 0;
        s >> ack >> x.size >> x.timeout_ms >> x.priority >> x.start_ns;
        x.ack = ack != 0;
      } else if (kind == "R") {
        Send& x = sends[key];
        int cancelled = 0;
        s >> x.outcome >> x.code >> cancelled >> x.end_ns;  // then the error's message (below)
        x.cancelled = cancelled != 0;
      } else {
        std::string ok;
        int rinc = 0;
        std::int64_t ns = 0;
        s >> ok >> rinc >> ns;
        deliveries.push_back({key, fmt::format("{} incarnation {} at {}", node_name(n), rinc, at(ns, run))});
        sends[key].delivered_to.push_back(rinc);  // (its S line may come later, from another log)
        sends[key].delivered_ns = ns;
      }
      if (!s) problems.push_back(fmt::format("a malformed line in {}.log: {}", node_name(n), line));
      if (kind == "R") std::getline(s >> std::ws, sends[key].message);
    }
  }
  // Order: per (src, incarnation, dst, tag) the receiver's log shows increasing numbers.
  std::map<std::tuple<int, int, int, int>, const Delivery*> last;  // the highest seq so far
  for (const auto& d : deliveries) {
    const auto& [src, inc, dst, tag, seq] = d.key;
    if (sends[d.key].retries > 0) continue;  // a retry is a later send: its place is its own
    auto [it, fresh] = last.try_emplace({src, inc, dst, tag}, &d);
    const Delivery& before = *it->second;
    if (!fresh && seq < std::get<4>(before.key)) {
      const Send& late = sends[d.key];
      problems.push_back(fmt::format("out of order: {} was delivered at {}, after seq {} was, at {} (that one: {}){}",
                                     describe(d.key, late, run), d.where, std::get<4>(before.key), before.where,
                                     describe(before.key, sends[before.key], run),
                                     faults_between(late.start_ns - 200'000'000, late.delivered_ns, run)));
    }
    if (seq > std::get<4>(before.key)) it->second = &d;
  }
  const auto receiver_killed_since = [&](int node, std::int64_t t) {
    auto it = run.killed_ns.find(node);
    return it != run.killed_ns.end() && std::any_of(it->second.begin(), it->second.end(), [&](std::int64_t k) { return k >= t; });
  };
  for (const auto& [key, s] : sends) {
    const auto& [src, inc, dst, tag, seq] = key;
    const std::string what = describe(key, s, run);
    const std::size_t n = s.delivered_to.size();
    if (s.start_ns == 0) {
      problems.push_back(fmt::format("{} was delivered but its sender never logged sending it", what));
      continue;
    }
    ++sum.sent;
    sum.acked += s.ack;
    sum.cancels += s.cancelled;
    sum.chunked += s.size > kChunkBytes;
    // At most once; a retried message at most once per receiver incarnation (a restarted
    // receiver no longer knows the retry keys it delivered).
    const std::set<int> incarnations(s.delivered_to.begin(), s.delivered_to.end());
    if (s.retries > 0 ? incarnations.size() < n : n > 1)
      problems.push_back(fmt::format("{} was delivered {} times (last at {}){}", what, n, at(s.delivered_ns, run),
                                     faults_between(s.start_ns - 200'000'000, s.delivered_ns, run)));
    sum.retried += s.retries > 0;
    sum.retried_delivered += s.retries > 0 && n > 0;
    const std::string error = fmt::format("{} (\"{}\")", s.code, s.message);
    if (s.outcome == "ok") {
      if (n > 0) ++sum.delivered;
      else if (!s.ack) ++sum.lost_no_ack;  // handed to the kernel only: a broken connection may lose it
      else if (receiver_killed_since(dst, s.start_ns)) ++sum.lost_receiver_killed;
      else
        problems.push_back(fmt::format("{} completed (acknowledged) but was never delivered{}", what,
                                       faults_between(s.start_ns - 200'000'000, s.end_ns, run)));
    } else if (s.outcome == "err") {
      // Only DeliveryUnknownError says "may have been delivered"; every other error, certainly
      // not: of the last try, that is, so a retried message's earlier tries may have been.
      const bool unknown = s.ack && (s.code == "DeliveryUnknownError" || s.retries > 0);
      if (!s.ack && s.code == "DeliveryUnknownError")
        problems.push_back(fmt::format("{} failed with {}, yet only an acked send can be unknown", what, error));
      if (unknown) {
        ++sum.unknown;
        sum.unknown_delivered += n > 0;
      } else {
        ++sum.failed;
        ++sum.failures_by_code[s.code];
        if (n > 0)
          problems.push_back(fmt::format("{} failed with {} and was delivered (at {}){}", what, error, at(s.delivered_ns, run),
                                         faults_between(s.start_ns - 200'000'000, std::max(s.end_ns, s.delivered_ns), run)));
      }
    } else if (s.outcome == "hang") {
      problems.push_back(fmt::format("{} never completed: still pending long after sending stopped", what));
    } else if (run.killed.count({src, inc})) {
      ++sum.orphans;  // its sender died first: either way
      sum.orphans_delivered += n > 0;
    } else {
      problems.push_back(fmt::format("{} has no outcome, though its sender lived on{}", what,
                                     settled.count({src, inc}) ? " and settled" : " (it never settled its sends)"));
    }
    // n0's process is never stopped: its sends complete by their timeouts (plus the loop's lag).
    if (src == 0 && s.timeout_ms >= 0 && !s.outcome.empty() && s.outcome != "hang") {
      const std::int64_t took_ms = (s.end_ns - s.start_ns) / 1000000;
      if (took_ms > (s.retries + 1) * (s.timeout_ms + kTimeoutSlack.count()))  // (each try has its timeout)
        problems.push_back(fmt::format("{} completed {} ({}) {} ms after it was sent, past its timeout", what, s.outcome,
                                       s.outcome == "ok" ? "ok" : error, took_ms));
    }
  }
  if (!settled.count({0, 0})) problems.push_back("n0 never settled its sends");
  return problems;
}

// ---------------------------------------------------------------------------------------------
// A run: n0 here, n1 and n2 as processes, faults for fault_time, then the check.

struct PeerProcess {
  Process process;
  int inc = 0;
};

// The last n characters of text (a crashed peer's stderr, for the failure message).
std::string tail(const std::string& text, std::size_t n = 3000) { return text.size() > n ? "..." + text.substr(text.size() - n) : text; }

void run_seed(std::uint64_t seed, std::chrono::seconds fault_time, bool long_run) {
  const auto started = Clock::now();
  std::printf("[ seed     ] CommRandomFaults seed %llu, %lld s of faults (replay: %sWCOMM_FAULT_SEED=%llu "
              "wcomm_integration_tests --gtest_filter=CommRandomFaults.FreshSeeds)\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(fault_time.count()),
              long_run ? "WCOMM_LONG_TESTS=1 " : "", static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  TempDir dir;
  Run run;
  std::mt19937_64 rng(seed);
  const auto uniform = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  const auto ports = free_tcp_ports(kNodes);
  Plan plan;
  for (int i = 0; i < kNodes; ++i) plan.listen[i] = ports[i];
  plan.link12 = seed % 2 ? "auto" : "unix";
  // proxies[k][0] carries what n0 dials for nk, proxies[k][1] what nk dials for n0: whichever
  // side dialed the pair's connection, a proxy of pair k is on it.
  std::unique_ptr<FaultProxy> proxies[kNodes][2];
  for (int k = 1; k < kNodes; ++k) {
    proxies[k][0] = std::make_unique<FaultProxy>(ports[k]);
    proxies[k][1] = std::make_unique<FaultProxy>(ports[0]);
    plan.route[0][k] = proxies[k][0]->port();
    plan.route[k][0] = proxies[k][1]->port();
  }
  plan.route[1][2] = ports[2];
  plan.route[2][1] = ports[1];
  plan.save(dir.path() / "plan");

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto spawn = [&](int k, int inc) {
    return Process::spawn({"env", "WCOMM_FAULT_DIR=" + dir.path().string(), "WCOMM_FAULT_NODE=" + std::to_string(k),
                           "WCOMM_FAULT_INCARNATION=" + std::to_string(inc), "WCOMM_FAULT_ROLE_SEED=" + std::to_string(seed),
                           self, "--gtest_filter=CommRandomFaults.PeerRole"},
                          dir.path(), fmt::format("{}-i{}", node_name(k), inc));
  };
  std::vector<std::string> problems;
  PeerProcess peers[kNodes];
  for (int k = 1; k < kNodes; ++k) peers[k].process = spawn(k, 0);
  const auto restart = [&](int k) { peers[k].process = spawn(k, ++peers[k].inc); };
  // A peer that exited by itself crashed (or failed): a violation, and it is started again.
  const auto check_alive = [&](int k) {
    if (auto code = peers[k].process.wait_for(milliseconds(0))) {
      problems.push_back(fmt::format("{} incarnation {} exited by itself with code {}:\n{}", node_name(k), peers[k].inc,
                                     *code, tail(peers[k].process.err())));
      restart(k);
    }
  };
  {
    auto n0 = std::make_unique<Node>(plan, 0, 0, seed, dir.path());
    const auto fault_end = Clock::now() + fault_time;
    while (Clock::now() < fault_end) {
      std::this_thread::sleep_for(milliseconds(uniform(50, 300)));  // the faults' pace
      for (int k = 1; k < kNodes; ++k) check_alive(k);
      const int k = int(uniform(1, kNodes - 1));
      // One of pair k's proxies, one way: "n0's dials to n1, toward n0", say.
      const int which = int(uniform(0, 1));
      FaultProxy& proxy = *proxies[k][which];
      const Direction way = uniform(0, 1) ? Direction::kToTarget : Direction::kToClient;
      const int dialer = which == 0 ? 0 : k, listener = which == 0 ? k : 0;
      const std::string link = fmt::format("{}'s dials to {}, toward {}", node_name(dialer), node_name(listener),
                                           node_name(way == Direction::kToTarget ? listener : dialer));
      const std::string pair = fmt::format("n0<->{}", node_name(k));
      switch (uniform(0, 7)) {
        case 0: {  // killed, and started again a moment later
          ASSERT_TRUE(peers[k].process.kill().has_value());
          run.note("kills", fmt::format("{} incarnation {} killed", node_name(k), peers[k].inc));
          run.killed.insert({k, peers[k].inc});
          run.killed_ns[k].push_back(now_ns());  // after it died: a send started later went elsewhere
          std::this_thread::sleep_for(milliseconds(uniform(0, 500)));
          restart(k);
          run.mark(fmt::format("{} incarnation {} started", node_name(k), peers[k].inc));
          break;
        }
        case 1: {  // stopped: a hung peer, past the heartbeat limit (3 intervals) or not
          const auto pause = milliseconds(uniform(50, 1500));
          if (!peers[k].process.stop()) break;  // it exited meanwhile: check_alive says so
          run.note("stops", fmt::format("{} stopped (for {} ms)", node_name(k), pause.count()));
          std::this_thread::sleep_for(pause);
          peers[k].process.cont();
          run.mark(fmt::format("{} continued", node_name(k)));
          break;
        }
        case 2:  // both sides of the pair's connection get an RST
          proxies[k][0]->reset();
          proxies[k][1]->reset();
          run.note("resets", fmt::format("{} connections reset", pair));
          break;
        case 3: {  // reset once up to 400 KiB more went one way: often mid-frame
          const auto bytes = std::uint64_t(uniform(1, 400 << 10));
          proxy.reset_after(way, bytes);
          run.note("mid-frame resets", fmt::format("reset after {} more bytes ({})", bytes, link));
          break;
        }
        case 4: {  // the proxy stops reading one way: TCP pushes back on the sender
          const auto pause = milliseconds(uniform(50, 800));
          proxy.set_stall(way, true);
          run.note("stalls", fmt::format("stall for {} ms ({})", pause.count(), link));
          std::this_thread::sleep_for(pause);
          proxy.set_stall(way, false);
          run.mark(fmt::format("stall lifted ({})", link));
          break;
        }
        case 5: {  // a silent link: everything one way is dropped, then the connections end. The
                   // listener is closed meanwhile, so no connection outlives the drop with a gap.
          const auto pause = milliseconds(uniform(100, 800));
          proxy.set_black_hole(way, true);
          run.note("black holes", fmt::format("black hole for {} ms ({})", pause.count(), link));
          std::this_thread::sleep_for(pause);
          proxy.refuse();
          proxy.reset();
          proxy.set_black_hole(way, false);
          proxy.reopen();
          run.mark(fmt::format("black hole ended by a reset ({})", link));
          break;
        }
        case 6: {  // dials refused for a while (open connections live on)
          const auto pause = milliseconds(uniform(100, 1000));
          proxies[k][0]->refuse();
          proxies[k][1]->refuse();
          run.note("refusals", fmt::format("{} dials refused for {} ms", pair, pause.count()));
          std::this_thread::sleep_for(pause);
          proxies[k][0]->reopen();
          proxies[k][1]->reopen();
          run.mark(fmt::format("{} dials accepted again", pair));
          break;
        }
        case 7: {  // a slow link both ways: large sends with short timeouts fail mid-write
          const auto rate = std::uint64_t(uniform(200 << 10, 2 << 20));
          const auto pause = milliseconds(uniform(300, 1500));
          for (auto& p : proxies[k]) {
            p->set_bandwidth(Direction::kToTarget, rate);
            p->set_bandwidth(Direction::kToClient, rate);
          }
          run.note("slow links", fmt::format("{} at {} KiB/s for {} ms", pair, rate >> 10, pause.count()));
          std::this_thread::sleep_for(pause);
          for (auto& p : proxies[k]) {
            p->set_bandwidth(Direction::kToTarget, 0);
            p->set_bandwidth(Direction::kToClient, 0);
          }
          run.mark(fmt::format("{} at full speed again", pair));
          break;
        }
      }
    }
    // Heal everything, then everyone stops sending and waits for every send to complete.
    for (int k = 1; k < kNodes; ++k) {
      check_alive(k);
      proxies[k][0]->heal();
      proxies[k][1]->heal();
    }
    touch(dir.path() / "stop");
    n0->stop_sending();
    const auto settle_limit = Clock::now() + std::chrono::seconds(kSanitized ? 75 : 50);
    for (int k = 1; k < kNodes; ++k) {
      const std::string settled = fmt::format("X {} {}\n", k, peers[k].inc);
      while (read_text_file(dir.path() / (node_name(k) + ".log")).find(settled) == std::string::npos &&
             peers[k].process.running() && Clock::now() < settle_limit)
        peers[k].process.wait_for(milliseconds(50));  // a bounded poll of its log (and its exit)
    }
    // What is still on its way arrives; then every node stops.
    touch(dir.path() / "finish");
    n0->drain();
    n0.reset();
  }
  for (int k = 1; k < kNodes; ++k) {
    auto code = peers[k].process.wait_for(std::chrono::seconds(40));
    if (code != 0)
      problems.push_back(fmt::format("{} incarnation {} {} at the end:\n{}", node_name(k), peers[k].inc,
                                     code ? "exited with code " + std::to_string(*code) : std::string("did not exit"),
                                     tail(peers[k].process.err())));
  }

  // WCOMM_FAULT_KEEP_LOGS=DIR keeps every log and output there, to look into a failure.
  if (const char* keep = std::getenv("WCOMM_FAULT_KEEP_LOGS")) {
    const auto to = std::filesystem::path(keep) / ("seed-" + std::to_string(seed));
    std::filesystem::create_directories(to);
    std::filesystem::copy(dir.path(), to, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  }
  Summary sum;
  auto violations = check_logs(dir.path(), run, sum);
  problems.insert(problems.end(), violations.begin(), violations.end());
  std::string faults, failures;
  for (const auto& [kind, count] : run.faults) faults += fmt::format("{}{} {}", faults.empty() ? "" : ", ", kind, count);
  for (const auto& [code, count] : sum.failures_by_code) failures += fmt::format("{}{} {}", failures.empty() ? "" : ", ", code, count);
  std::printf("[ summary  ] seed %llu (n1<->n2 over %s): sent %d (%d acked, %d above chunk_bytes, %d cancelled), "
              "delivered %d, failed %d (%s), unknown %d (%d of them delivered), retried %d (%d delivered), "
              "sender killed first %d (%d delivered), "
              "completed but lost %d (no ack) + %d (receiver killed); faults: %s; %d violations; %.1f s\n",
              static_cast<unsigned long long>(seed), plan.link12 == "auto" ? "shm" : "unix", sum.sent, sum.acked,
              sum.chunked, sum.cancels, sum.delivered, sum.failed, failures.c_str(), sum.unknown, sum.unknown_delivered,
              sum.retried, sum.retried_delivered,
              sum.orphans, sum.orphans_delivered, sum.lost_no_ack, sum.lost_receiver_killed, faults.c_str(),
              int(problems.size()), std::chrono::duration<double>(Clock::now() - started).count());
  std::fflush(stdout);
  ::testing::Test::RecordProperty("seed_" + std::to_string(seed) + "_sent", sum.sent);
  ::testing::Test::RecordProperty("seed_" + std::to_string(seed) + "_violations", int(problems.size()));
  for (std::size_t i = 0; i < std::min<std::size_t>(problems.size(), 25); ++i)
    ADD_FAILURE() << "seed " << seed << ": " << problems[i];
  if (problems.size() > 25) ADD_FAILURE() << "seed " << seed << ": and " << problems.size() - 25 << " more violations";
  EXPECT_GT(sum.delivered, 100) << "seed " << seed << ": too little traffic to say anything";
  EXPECT_GT(sum.failed + sum.unknown, 0) << "seed " << seed << ": no send failed: the faults did not bite";
}

TEST(CommRandomFaults, Seed1) { run_seed(1, kFaultTime, false); }
TEST(CommRandomFaults, Seed2) { run_seed(2, kFaultTime, false); }
TEST(CommRandomFaults, Seed3) { run_seed(3, kFaultTime, false); }
TEST(CommRandomFaults, Seed4) { run_seed(4, kFaultTime, false); }

// WCOMM_FAULT_SEED=N replays seed N; WCOMM_LONG_TESTS=1 runs fresh seeds, 20 s of faults each,
// for WCOMM_FAULT_BUDGET_S seconds (85: within ctest's 120 s for the integration tests).
TEST(CommRandomFaults, FreshSeeds) {
  const char* replay = std::getenv("WCOMM_FAULT_SEED");
  const char* long_env = std::getenv("WCOMM_LONG_TESTS");
  const bool long_run = long_env && std::string(long_env) == "1";
  if (replay) return run_seed(std::strtoull(replay, nullptr, 10), long_run ? kLongFaultTime : kFaultTime, long_run);
  if (!long_run) GTEST_SKIP() << "WCOMM_LONG_TESTS=1 runs fresh seeds; WCOMM_FAULT_SEED=N replays one";
  const char* budget_env = std::getenv("WCOMM_FAULT_BUDGET_S");
  const std::chrono::duration<double> budget(budget_env ? std::atof(budget_env) : 85.0);
  const auto start = Clock::now();
  std::chrono::duration<double> last{0};
  std::random_device fresh;
  while (!HasFailure() && Clock::now() - start + last < budget) {
    const auto t = Clock::now();
    run_seed((std::uint64_t(fresh()) << 32 | fresh()) % 1000000000, kLongFaultTime, true);
    last = Clock::now() - t;
  }
}

// n1 or n2 of a run above (skipped unless started by one).
TEST(CommRandomFaults, PeerRole) {
  const char* dir_env = std::getenv("WCOMM_FAULT_DIR");
  if (!dir_env) GTEST_SKIP() << "a peer process of the other CommRandomFaults tests";
  const std::filesystem::path dir = dir_env;
  const int self = std::atoi(std::getenv("WCOMM_FAULT_NODE"));
  const int inc = std::atoi(std::getenv("WCOMM_FAULT_INCARNATION"));
  const std::uint64_t seed = std::strtoull(std::getenv("WCOMM_FAULT_ROLE_SEED"), nullptr, 10);
  Node node(Plan::load(dir / "plan"), self, inc, seed, dir);
  ASSERT_TRUE(wait_for_file(dir / "stop", std::chrono::minutes(10))) << "the test went away";
  node.stop_sending();
  ASSERT_TRUE(wait_for_file(dir / "finish", std::chrono::minutes(3))) << "the test went away";
  node.drain();
}

}  // namespace
}  // namespace wcomm::testing
