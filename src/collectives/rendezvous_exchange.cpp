// The rendezvous exchange: every rank registers (rank, world, host, port) with rank 0 over a
// short-lived TCP connection, one JSON line each way; rank 0 checks the registrations and
// answers every rank with the whole directory, or with the same error.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/line_io.h"
#include "wcomm/collectives/rendezvous.h"
#include "wcomm/errors.h"

namespace wcomm {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&& o) noexcept { std::swap(fd, o.fd); return *this; }
  ~Fd() { if (fd >= 0) ::close(fd); }
};

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// One line (without '\n') from `who`; throws OperationTimeoutError, ConnectionClosedError or
// ProtocolError (over 1 MiB) saying who.
std::string read_line_from(int fd, Clock::time_point deadline, const std::string& who) {
  Result<std::string> line = read_line(fd, deadline, 1 << 20);
  if (!line.ok()) throw_error({line.error().code, "rendezvous: " + who + ": " + line.error().message});
  return std::move(line).value();
}

// A reader that went away has its own error to report: a failed write is not one.
void write_line(int fd, const std::string& text) { (void)write_all(fd, text); }

addrinfo* resolve(const std::string& host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) throw ConnectionFailedError("rendezvous: cannot resolve '" + host + "': " + ::gai_strerror(rc));
  return res;
}

// Connects to rank 0, retrying until the deadline (rank 0 may start later than this rank).
Fd connect_master(const RendezvousSpec& spec, Clock::time_point deadline) {
  std::string where = spec.master_addr + ":" + std::to_string(spec.master_port);
  auto pause = std::chrono::milliseconds(10);
  std::string last = "no attempt";
  while (true) {
    addrinfo* res = resolve(spec.master_addr, spec.master_port, false);
    Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int rc = ::connect(fd.fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc == 0) return fd;
    last = std::strerror(errno);
    if (Clock::now() + pause >= deadline)
      throw ConnectionFailedError("rendezvous: rank " + std::to_string(spec.rank) + " could not reach rank 0 at " +
                                  where + " within the timeout (" + last + ")");
    std::this_thread::sleep_for(pause);  // a retry backoff, not synchronisation
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

std::string local_address(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return text;
}

// Two ranks with the same key can reach each other's abstract Unix sockets: one kernel (boot
// id) and one network namespace. "" when unknown (then only TCP is used).
std::string host_key(const RendezvousSpec& spec) {
  const char* mode = std::getenv("WCOMM_SAME_HOST");
  bool wanted = mode ? std::string(mode) == "unix" : spec.same_host_unix;
  if (!wanted) return {};
  char boot[64] = {};
  FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return {};
  bool ok = std::fgets(boot, sizeof boot, f) != nullptr;
  std::fclose(f);
  char ns[128] = {};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (!ok || n <= 0) return {};
  std::string key = std::string(boot) + "/" + std::string(ns, static_cast<std::size_t>(n));
  key.erase(std::remove(key.begin(), key.end(), '\n'), key.end());
  return key;
}

json registration(const RendezvousSpec& spec, const std::string& host, std::uint16_t port) {
  return {{"rank", spec.rank}, {"world", spec.world}, {"host", host}, {"port", port}, {"host_key", host_key(spec)}};
}

// The directory with Unix socket addresses added between ranks that share a host key: every
// such rank listens on its own, and dials such a peer there first (TCP stays as the fallback).
std::vector<Peer> with_same_host_sockets(std::vector<Peer> dir, const std::vector<std::string>& keys,
                                         const std::string& nonce, int self) {
  if (nonce.empty() || keys.size() != dir.size() || keys[self].empty()) return dir;
  for (std::size_t k = 0; k < dir.size(); ++k) {
    if (keys[k] != keys[self]) continue;
    Address unix_socket = Address::parse("unix://@wcomm-" + nonce + "-" + std::to_string(k));
    if (static_cast<int>(k) == self) {
      dir[k].addresses.push_back(unix_socket);  // listened on beside host:port
    } else {
      Address tcp = Address::tcp(dir[k].host, dir[k].port);
      dir[k].host.clear();  // endpoints() then tries the addresses in this order
      dir[k].port = 0;
      dir[k].addresses = {unix_socket, tcp};
    }
  }
  return dir;
}

std::vector<Peer> parse_reply(const std::string& line, int self) {
  json reply = json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) throw ProtocolError("rendezvous: rank 0 sent an unreadable reply");
  if (reply.contains("error") && reply["error"].is_string()) throw InvalidArgumentError(reply["error"].get<std::string>());
  const json* peers = reply.contains("peers") ? &reply["peers"] : nullptr;
  const auto is_entry = [](const json& e) {
    return e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number_unsigned() && e[1].get<std::uint64_t>() <= 65535;
  };
  if (!peers || !peers->is_array() || !std::all_of(peers->begin(), peers->end(), is_entry))
    throw ProtocolError("rendezvous: the reply from master_addr:master_port has no valid peer list "
                        "(is something other than wcomm's rank 0 listening there?)");
  std::vector<Peer> dir;
  for (const json& e : *peers)
    dir.push_back(Peer{.node_id = "", .host = e[0].get<std::string>(), .port = e[1].get<std::uint16_t>()});
  return with_same_host_sockets(std::move(dir), reply.value("host_keys", std::vector<std::string>{}),
                                reply.value("nonce", std::string()), self);
}

std::vector<Peer> serve(const RendezvousSpec& spec, std::uint16_t port, Clock::time_point deadline) {
  addrinfo* res = resolve("", spec.master_port, true);
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = ::bind(listener.fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0 || ::listen(listener.fd, 1024) != 0)
    throw ConnectionFailedError("rendezvous: rank 0 cannot listen on port " + std::to_string(spec.master_port) + ": " +
                                std::strerror(errno) + " (is another process rank 0, or is the port taken?)");
  std::string host = spec.advertise_host.empty() ? spec.master_addr : spec.advertise_host;
  std::vector<Peer> dir(spec.world);
  dir[0] = Peer{.node_id = "", .host = host, .port = port};
  std::map<int, std::string> seen;  // rank -> who registered it
  std::vector<std::string> keys(spec.world);
  keys[0] = host_key(spec);
  std::vector<Fd> clients;
  std::string error;
  while (static_cast<int>(clients.size()) < spec.world - 1) {
    pollfd p{listener.fd, POLLIN, 0};
    int n = ::poll(&p, 1, ms_left(deadline));
    if (n == 0) {
      std::string missing;
      for (int k = 1; k < spec.world; ++k)
        if (!seen.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
      error = "rendezvous: timed out: rank(s) " + missing + " of " + std::to_string(spec.world) + " never registered with rank 0";
      break;
    }
    if (n < 0) continue;
    Fd c(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (c.fd < 0) continue;
    json reg = json::parse(read_line_from(c.fd, deadline, "a registering rank"), nullptr, false);
    if (reg.is_discarded() || !reg.contains("rank")) continue;  // not a rank: ignore it
    int rank = reg.value("rank", -1), world = reg.value("world", 0);
    std::string where = reg.value("host", std::string()) + ":" + std::to_string(reg.value("port", 0));
    if (error.empty()) {
      if (world != spec.world)
        error = "rendezvous: rank " + std::to_string(rank) + " (" + where + ") has world size " + std::to_string(world) +
                ", rank 0 has " + std::to_string(spec.world) + ": every rank must be given the same world size";
      else if (rank < 1 || rank >= spec.world)
        error = "rendezvous: a process registered as rank " + std::to_string(rank) + " (" + where +
                "), outside the world (0.." + std::to_string(spec.world - 1) + ")";
      else if (seen.count(rank))
        error = "rendezvous: rank " + std::to_string(rank) + " registered twice (" + seen[rank] + " and " + where +
                "): every process needs its own rank";
    }
    if (rank >= 0 && rank < spec.world && !seen.count(rank)) {
      seen[rank] = where;
      dir[rank] = Peer{.node_id = "", .host = reg.value("host", std::string()), .port = static_cast<std::uint16_t>(reg.value("port", 0))};
      keys[rank] = reg.value("host_key", std::string());
    }
    clients.push_back(std::move(c));
  }
  json reply;
  if (error.empty()) {
    json peers = json::array();
    for (const Peer& p : dir) peers.push_back({p.host, p.port});
    // The socket names' nonce: this rendezvous's, so that two jobs on one host never meet.
    std::string nonce = std::to_string(::getpid()) + "-" + std::to_string(spec.master_port) + "-" +
                        std::to_string(Clock::now().time_since_epoch().count() % 1000000007);
    reply = {{"peers", peers}, {"host_keys", keys}, {"nonce", nonce}};
  } else {
    reply = {{"error", error}};
  }
  for (Fd& c : clients) write_line(c.fd, reply.dump() + "\n");
  if (!error.empty()) throw InvalidArgumentError(error);
  return with_same_host_sockets(std::move(dir), keys, reply["nonce"], 0);
}

}  // namespace

std::vector<Peer> rendezvous_exchange(const RendezvousSpec& spec, std::uint16_t port) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(spec.timeout);
  if (spec.rank == 0) {
    if (spec.world == 1)
      return {Peer{.node_id = "", .host = spec.advertise_host.empty() ? "127.0.0.1" : spec.advertise_host, .port = port}};
    return serve(spec, port, deadline);
  }
  Fd fd = connect_master(spec, deadline);
  std::string host = spec.advertise_host.empty() ? local_address(fd.fd) : spec.advertise_host;
  write_line(fd.fd, registration(spec, host, port).dump() + "\n");
  std::vector<Peer> dir = parse_reply(read_line_from(fd.fd, deadline, "rank 0's directory"), spec.rank);
  if (dir.size() != static_cast<std::size_t>(spec.world)) throw ProtocolError("rendezvous: rank 0 sent a directory of another size");
  return dir;
}

}  // namespace wcomm
