// mesh_peer: one mesh entity in its own process, for the mesh tests (tests/mesh).
//   mesh_peer BACKEND PROTOCOL PREFIX MY_ID PEER_ID MODE [ARGS...]
// BACKEND zmq | wcomm; PROTOCOL IPC | TCP | SHM. Modes:
//   flood N SIZE HWM blocking|outbox  send N messages of SIZE bytes to PEER_ID while reading
//                                     its N; prints "done" once both are complete
//   send N HWM                        send {"seq": i} for i < N (blocking), then wait for "ok"
//   recvseq N HWM                     receive N messages, check seq is 0..N-1 in order, reply "ok"
//   anchor                            hold the entity (as conductor: the anchor lock), print
//                                     "ready", idle until killed (at most 60 s)
// Exit 0 on success, 1 with the reason on stderr.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/mesh/outbox.h"
#include "wcomm/mesh/wcomm_communicator.h"
#include "wcomm/mesh/zmq_communicator.h"

using namespace wcomm;
using namespace wcomm::mesh;

namespace {

std::unique_ptr<Communicator> make(const std::string& backend, CommProtocol protocol, const std::string& prefix,
                                   const std::string& me, const std::string& peer, int hwm) {
  std::vector<std::string> push = {peer};
  if (backend == "zmq") {
    ZmqOptions o{.protocol = protocol, .ipc_socket_path_prefix = prefix};
    if (hwm > 0) o.sndhwm = o.rcvhwm = hwm;
    return std::make_unique<ZmqCommunicator>(me, push, o);
  }
  WcommOptions o{.protocol = protocol, .ipc_socket_path_prefix = prefix};
  if (hwm > 0) {
    o.sndhwm = hwm;
    o.max_inbox_messages = static_cast<std::size_t>(hwm);
  }
  return std::make_unique<WcommCommunicator>(me, push, o);
}

std::int64_t field(const Value& v, const char* key) {
  const Value* f = v.is<Dict>() ? v.as<Dict>().find(key) : nullptr;
  return f && f->is<std::int64_t>() ? f->as<std::int64_t>() : -1;
}

// Reads until a message has `key` == value or timeout_s passes; true if it came.
bool wait_for(Communicator& c, const char* key, std::int64_t value, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline)
    for (const Value& v : c.get_all_new_messages(true, 0.1))
      if (field(v, key) == value) return true;
  return false;
}

int flood(Communicator& c, const std::string& peer, long n, long size, bool outbox_mode) {
  OutboxCommunicator outbox(c);
  const Value msg = Dict{{"blob", Bytes(std::string(static_cast<std::size_t>(size), 'x'))}};
  long received = 0;
  bool peer_done = false;  // the peer's "done" may come while this side still reads its blobs
  const auto count = [&](const std::vector<Value>& got) {
    for (const Value& v : got) {
      if (field(v, "done") == 1) peer_done = true;
      else ++received;
    }
  };
  // Bursts bigger than what the sockets between the two can hold: blocking sends cannot
  // finish a burst while the other side is in its own.
  constexpr long kBurst = 64;
  for (long i = 0; i < n; ++i) {
    if (outbox_mode) outbox.send(peer, msg);
    else c.send(peer, msg);
    if ((i + 1) % kBurst != 0) continue;
    count(outbox_mode ? outbox.get_all_new_messages() : c.get_all_new_messages());
    std::fprintf(stderr, "sent %ld received %ld\n", i + 1, received);
  }
  while (received < n || (outbox_mode && outbox.flush()))
    count(outbox_mode ? outbox.get_all_new_messages(true, 0.05) : c.get_all_new_messages(true, 0.05));
  std::fprintf(stderr, "sent %ld received %ld\n", n, received);
  std::cout << "done" << std::endl;
  // Tell the peer we are complete and wait (bounded) for its word, so neither exits while the
  // other still reads from it (LINGER 0 drops what is unsent at exit).
  c.send(peer, Dict{{"done", 1}});
  if (!peer_done) wait_for(c, "done", 1, 5.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: mesh_peer BACKEND PROTOCOL PREFIX MY_ID PEER_ID MODE [ARGS...]\n");
    return 2;
  }
  const std::string backend = argv[1], prefix = argv[3], me = argv[4], peer = argv[5], mode = argv[6];
  const CommProtocol protocol = parse_protocol(argv[2]);
  auto arg = [&](int i) { return i < argc ? std::atol(argv[i]) : 0; };
  try {
    if (mode == "flood") {
      auto c = make(backend, protocol, prefix, me, peer, static_cast<int>(arg(9)));
      return flood(*c, peer, arg(7), arg(8), argc > 10 && std::string(argv[10]) == "outbox");
    }
    if (mode == "send") {
      auto c = make(backend, protocol, prefix, me, peer, static_cast<int>(arg(8)));
      const long n = arg(7);
      for (long i = 0; i < n; ++i) c->send(peer, Dict{{"seq", i}});
      if (!wait_for(*c, "ok", n, 60.0)) {
        std::fprintf(stderr, "no ok from %s within 60 s\n", peer.c_str());
        return 1;
      }
      std::cout << "sent " << n << std::endl;
      c->send(peer, Dict{{"bye", 1}});
      return 0;
    }
    if (mode == "recvseq") {
      auto c = make(backend, protocol, prefix, me, peer, static_cast<int>(arg(8)));
      std::cout << "ready" << std::endl;
      const long n = arg(7);
      long next = 0;
      while (next < n) {
        for (const Value& v : c->get_all_new_messages(true, 1.0)) {
          if (field(v, "seq") != next) {
            std::fprintf(stderr, "expected seq %ld, got %s\n", next, summarize(v).c_str());
            return 1;
          }
          ++next;
        }
      }
      std::cout << "ok " << n << std::endl;
      c->send(peer, Dict{{"ok", n}});
      // The "ok" must leave before the socket closes (LINGER 0 would drop it): the sender's
      // "bye" says it arrived (bounded: a lost "bye" costs 5 s, not a hang).
      wait_for(*c, "bye", 1, 5.0);
      return 0;
    }
    if (mode == "anchor") {
      auto c = make(backend, protocol, prefix, me, peer, 0);
      std::cout << "ready" << std::endl;
      c->get_all_new_messages(true, 60.0);
      return 0;
    }
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mesh_peer %s: %s\n", me.c_str(), e.what());
    return 1;
  }
}
