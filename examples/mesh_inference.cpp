// The entity mesh in C++: an api_server, a conductor and two workers, each its own process,
// serving a few requests. Run with no arguments, it starts the four and waits for them:
//   mesh_inference [zmq|wcomm] [N_REQUESTS]
// zmq: the ZeroMQ-compatible communicator (any entity could be a pyzmq one instead); wcomm:
// wcomm's own transport. The conductor never blocks on a busy worker (OutboxCommunicator).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/mesh/outbox.h"
#include "wcomm/mesh/wcomm_communicator.h"
#include "wcomm/mesh/zmq_communicator.h"

using namespace wcomm;
using namespace wcomm::mesh;

namespace {

const std::vector<std::string> kEntities = {"api_server", "conductor", "worker_0", "worker_1"};

std::unique_ptr<Communicator> connect(const std::string& backend, const std::string& prefix, const std::string& me,
                                      std::vector<std::string> push) {
  if (backend == "wcomm")  // wcomm's peer directory is fixed: everyone who may send to us
    return std::make_unique<WcommCommunicator>(me, push, WcommOptions{.ipc_socket_path_prefix = prefix, .peer_ids = kEntities});
  return std::make_unique<ZmqCommunicator>(me, push, ZmqOptions{.ipc_socket_path_prefix = prefix});
}

const Value* get(const Value& msg, const char* key) { return msg.is<Dict>() ? msg.as<Dict>().find(key) : nullptr; }
std::string text(const Value& msg, const char* key) {
  const Value* v = get(msg, key);
  return v && v->is<std::string>() ? v->as<std::string>() : "";
}

int api_server(Communicator& c, int n) {
  for (int i = 0; i < n; ++i) c.send("conductor", Dict{{"op", "request"}, {"id", i}, {"prompt", "hello " + std::to_string(i)}});
  for (int done = 0; done < n;) {
    for (const Value& r : c.get_all_new_messages(true, 30.0)) {
      std::printf("api_server: request %lld -> '%s' (by %s)\n", static_cast<long long>(get(r, "id")->as<std::int64_t>()),
                  text(r, "text").c_str(), text(r, "worker").c_str());
      ++done;
    }
  }
  c.send("conductor", Dict{{"op", "shutdown"}});
  return 0;
}

int conductor(Communicator& c) {
  OutboxCommunicator out(c);  // a slow worker must not stop the conductor reading
  int next = 0;
  while (true) {
    for (const Value& m : out.get_all_new_messages(true, 1.0)) {
      if (text(m, "op") == "shutdown") {
        out.send_each({"worker_0", "worker_1"}, Dict{{"op", "shutdown"}});
        // Closing drops what is unsent (LINGER 0, as in a pyzmq mesh): wait for both workers'
        // word (bounded) before going.
        int byes = 0;
        for (int i = 0; i < 50 && byes < 2; ++i)
          for (const Value& r : out.get_all_new_messages(true, 0.1)) byes += text(r, "op") == "bye";
        return 0;
      }
      out.send("worker_" + std::to_string(next++ % 2), m);  // round robin
    }
  }
}

int worker(Communicator& c) {
  while (true) {
    for (const Value& m : c.get_all_new_messages(true, 1.0)) {
      if (text(m, "op") == "shutdown") {
        c.send("conductor", Dict{{"op", "bye"}});
        return 0;
      }
      std::string t = text(m, "prompt");
      for (char& ch : t) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));  // the "model"
      c.send("api_server", Dict{{"id", *get(m, "id")}, {"text", t}, {"worker", c.my_id()}});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "zmq";
  const int n = argc > 2 ? std::atoi(argv[2]) : 6;
  if (argc > 4) {  // one entity: mesh_inference BACKEND N PREFIX ENTITY
    const std::string prefix = argv[3], me = argv[4];
    try {
      if (me == "api_server") return api_server(*connect(backend, prefix, me, {"conductor"}), n);
      if (me == "conductor") return conductor(*connect(backend, prefix, me, {"worker_0", "worker_1"}));
      return worker(*connect(backend, prefix, me, {"api_server", "conductor"}));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", me.c_str(), e.what());
      return 1;
    }
  }
  // The launcher: the four entities as separate processes, in any order.
  char tmpl[] = "/tmp/mesh-example-XXXXXX";
  const std::string prefix = std::string(mkdtemp(tmpl)) + "/";
  std::vector<pid_t> children;
  for (const std::string& entity : kEntities) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string count = std::to_string(n);
      execl("/proc/self/exe", argv[0], backend.c_str(), count.c_str(), prefix.c_str(), entity.c_str(), nullptr);
      _exit(127);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::filesystem::remove_all(prefix);
  std::printf("%s\n", failed ? "some entity failed" : "all entities done");
  return failed ? 1 : 0;
}
