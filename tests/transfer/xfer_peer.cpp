// A peer process for the transfer tests: an Agent (or an encoder-cache producer) in its own
// process, driven by commands on tag 1 of a Comm whose only peer is the test.
//   wcomm_xfer_peer agent|producer BACKEND PORT TEST_PORT [--stall | --die-mid-write] [--ucx-tls TLS]
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"
#include "wcomm/xfer/cache_service.h"
#include "xfer_bytes.h"

using namespace wcomm;
using namespace wcomm::xfer;
using wcomm::xfer::testing::pattern;
using wcomm::xfer::testing::sha256_hex;

namespace {


std::int64_t int_of(const Dict& d, const char* key) {
  const Value* v = d.find(key);
  return v && v->is<std::int64_t>() ? v->as<std::int64_t>() : 0;
}
std::string str_of(const Dict& d, const char* key) {
  const Value* v = d.find(key);
  return v && v->is<std::string>() ? v->as<std::string>() : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s agent|producer BACKEND PORT TEST_PORT [--stall]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const BackendKind backend = parse_backend(argv[2]);
  const auto port = static_cast<std::uint16_t>(std::stoi(argv[3]));
  const auto test_port = static_cast<std::uint16_t>(std::stoi(argv[4]));
  bool stall = false, die_mid_write = false;
  for (int i = 5; i < argc; ++i) {
    stall |= std::strcmp(argv[i], "--stall") == 0;
    die_mid_write |= std::strcmp(argv[i], "--die-mid-write") == 0;
  }

  const Peer test{"test", "127.0.0.1", test_port};
  auto comm = Comm::create(CommSpec{.local = {"peer", "127.0.0.1", port}, .peers = {test}});
  AgentConfig agent_config{.name = "peer", .backend = backend, .comm = comm};

  std::unique_ptr<Agent> own_agent;
  std::unique_ptr<CacheProducer> producer;
  Agent* agent = nullptr;
  if (mode == "agent") {
    own_agent = Agent::create(agent_config);
    agent = own_agent.get();
  } else {
    CacheProducerConfig pc{.comm = comm, .compat = {.model_id = "test-model", .dtype = "float16", .block_bytes = 4096},
                           .agent = agent_config};
    if (stall)
      pc.before_ack = [](const std::string& key) {
        std::fprintf(stderr, "stalled before the ack of %s\n", key.c_str());
        std::fflush(stderr);
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // a producer hung mid-request
      };
    if (die_mid_write)
      pc.after_post = [](const std::string&) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // let some of the bytes move
        ::kill(::getpid(), SIGKILL);  // a producer that dies while its write is in flight
      };
    producer = CacheProducer::create(pc);
    agent = &producer->agent();
  }

  // Memory the test writes to and reads from: 64 MiB, registered in two overlapping halves
  // (the cache merges them into one region).
  const std::size_t size = 64u << 20;
  std::vector<std::uint8_t> memory = pattern(size, 7);
  if (!agent->register_memory(memory.data(), size / 2 + 4096) || !agent->register_memory(memory.data() + size / 2, size / 2)) {
    std::fprintf(stderr, "register failed\n");
    return 1;
  }
  std::fprintf(stderr, "ready\n");
  std::fflush(stderr);

  for (;;) {
    Received got = comm->recv(comm->peer("test"), {.tag = 1}).get();
    const Dict& cmd = got.value.as<Dict>();
    const std::string name = str_of(cmd, "cmd");
    Value reply;
    if (name == "metadata") {
      reply = Dict{{"metadata", Bytes(agent->metadata())}, {"base", static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(memory.data()))},
                   {"size", static_cast<std::uint64_t>(size)}, {"generation", agent->generation()}};
    } else if (name == "sha256") {
      const auto off = static_cast<std::size_t>(int_of(cmd, "offset"));
      const auto len = static_cast<std::size_t>(int_of(cmd, "len"));
      reply = Dict{{"sha256", sha256_hex(memory.data() + off, len)}};
    } else if (name == "add_remote") {
      auto r = agent->add_remote(cmd.find("metadata")->as<Bytes>().view());
      reply = Dict{{"ok", r.ok()}, {"reason", r.ok() ? std::string() : r.error().message}};
    } else if (name == "notifications") {
      List items;
      for (const Notification& n : agent->take_notifications()) items.items.push_back(Tuple{n.remote, n.message});
      reply = Dict{{"notifications", items}};
    } else if (name == "publish") {
      auto data = pattern(static_cast<std::size_t>(int_of(cmd, "size")), static_cast<std::uint64_t>(int_of(cmd, "seed")));
      producer->publish(str_of(cmd, "key"), data.data(), data.size());
      reply = Dict{{"parked", static_cast<std::int64_t>(producer->parked_requests())}};
    } else if (name == "parked") {
      reply = Dict{{"parked", static_cast<std::int64_t>(producer->parked_requests())}};
    } else if (name == "exit") {
      comm->send(Dict{{"ok", true}}, comm->peer("test"), {}, {.tag = 2}).get();
      break;
    } else {
      reply = Dict{{"error", "unknown command " + name}};
    }
    comm->send(reply, comm->peer("test"), {}, {.tag = 2}).get();
  }
  producer.reset();
  own_agent.reset();
  comm->close();
  return 0;
}
