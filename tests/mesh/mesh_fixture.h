// Shared by the mesh tests: where the helper programs are, scoped environment variables, and
// a per-test IPC directory.
#pragma once

#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "process_util.h"
#include "wcomm/mesh/communicator.h"

namespace wcomm::mesh {
// Readable test names in ctest for protocol-parameterised tests (found by ADL).
inline void PrintTo(CommProtocol p, std::ostream* os) { *os << protocol_name(p); }
}  // namespace wcomm::mesh

namespace wcomm::mesh::testing {

using wcomm::testing::Process;
using wcomm::testing::TempDir;

inline const std::string kMeshPeer = WCOMM_MESH_PEER;          // tests/mesh/peer/mesh_peer.cpp
inline const std::string kPyzmqEntity = WCOMM_PYZMQ_ENTITY;    // tests/mesh/pyzmq_entity.py

// Sets an environment variable (children inherit it) and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// An IPC prefix inside dir, and (for TCP) a free range of ports for the entities: a base port
// whose api_server (base) and worker_N (base+100+N) ports were free a moment ago.
inline std::string ipc_prefix(const TempDir& dir) { return (dir.path() / "ipc").string() + "/"; }
inline std::string tcp_base_port() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const std::uint16_t base = wcomm::testing::free_tcp_port();
    if (base > 60000) continue;
    // The other ports the tests use: base+1 (conductor), base+100, base+101 (workers).
    bool free = true;
    for (int off : {1, 100, 101}) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<std::uint16_t>(base + off));
      free &= ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
    }
    if (free) return std::to_string(base);
  }
  return "19000";
}

inline const char* protocol_arg(CommProtocol p) { return protocol_name(p); }

// A backend ("zmq" or "wcomm") and its protocol, for tests parameterised over both.
struct BackendCase {
  const char* backend;
  CommProtocol protocol;
};
// Readable test names in ctest (instead of the struct's bytes).
inline void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.backend << "/" << protocol_name(c.protocol); }

}  // namespace wcomm::mesh::testing
