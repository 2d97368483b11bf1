// Shared pieces of the transfer tests: a peer process (tests/transfer/xfer_peer.cpp) driven
// over a Comm, the byte patterns both sides generate, and the backends every suite runs on.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "process_util.h"
#include "xfer_bytes.h"
#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"

namespace wcomm::xfer::testing {

using namespace std::chrono_literals;
using wcomm::testing::Process;
using wcomm::testing::TempDir;

// A backend as the suites name it: the agent backend plus, for ucx, the UCX transports.
struct BackendParam {
  std::string label;    // test name suffix
  std::string backend;  // cma / ucx / tcp
  std::string ucx_tls;  // UCX_TLS for ucx ("" otherwise)
};
inline std::vector<BackendParam> all_backends() {
#ifdef WCOMM_HAVE_UCX
  return {{"cma", "cma", ""}, {"tcp", "tcp", ""}, {"ucx_tcp", "ucx", "tcp"}, {"ucx_shm", "ucx", "posix,self"}};
#else  // a build without UCX (WCOMM_WITH_UCX=OFF): its ucx backend only says why (local_test)
  return {{"cma", "cma", ""}, {"tcp", "tcp", ""}};
#endif
}
inline std::string param_name(const ::testing::TestParamInfo<BackendParam>& info) { return info.param.label; }


// The test's Comm (node "test") and one peer process (node "peer") it commands on tag 1.
class PeerHarness {
 public:
  PeerHarness(const BackendParam& param, const std::string& mode, std::vector<std::string> extra = {}) : param_(param) {
    if (!param.ucx_tls.empty()) ::setenv("UCX_TLS", param.ucx_tls.c_str(), 1);
    else ::unsetenv("UCX_TLS");
    auto ports = wcomm::testing::free_tcp_ports(2);
    test_port_ = ports[0];
    peer_port_ = ports[1];
    comm_ = Comm::create(CommSpec{.local = {"test", "127.0.0.1", test_port_}, .peers = {{"peer", "127.0.0.1", peer_port_}},
                                  .comm = {.heartbeat_interval_s = 0.2}});
    mode_ = mode;
    extra_ = std::move(extra);
    start();
  }
  ~PeerHarness() {
    if (process_.running()) process_.kill();
    comm_->close();
    // What the peer said is the first thing to read when a test with it failed.
    if (::testing::Test::HasFailure())
      std::fprintf(stderr, "the peer process's output:\n%s\n", process_.output().c_str());
  }

  void start() {
    std::vector<std::string> argv{WCOMM_XFER_PEER, mode_, param_.backend, std::to_string(peer_port_), std::to_string(test_port_)};
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    process_ = Process::spawn(argv, dir_.path(), "peer" + std::to_string(++starts_));
    ASSERT_TRUE(process_.wait_for_stderr("ready", 20s)) << process_.output();
  }

  Dict command(Dict cmd) {
    const Peer& peer = comm_->peer("peer");
    comm_->send(std::move(cmd), peer, {}, {.tag = 1, .timeout = 10s}).get();
    Received got = comm_->recv(peer, {.tag = 2, .timeout = 20s}).get();
    return got.value.as<Dict>();
  }
  std::string peer_sha(std::uint64_t offset, std::uint64_t len) {
    return command(Dict{{"cmd", "sha256"}, {"offset", offset}, {"len", len}}).find("sha256")->as<std::string>();
  }

  std::shared_ptr<Comm> comm() const { return comm_; }
  Process& process() { return process_; }
  const BackendParam& param() const { return param_; }

 private:
  BackendParam param_;
  std::string mode_;
  std::vector<std::string> extra_;
  TempDir dir_;
  std::uint16_t test_port_ = 0, peer_port_ = 0;
  std::shared_ptr<Comm> comm_;
  Process process_;
  int starts_ = 0;
};

// Waits (bounded) until the transfer is no longer pending.
inline XferStatus wait_done(Agent& agent, XferHandle h, std::chrono::seconds limit = 30s) { return agent.wait(h, limit); }

}  // namespace wcomm::xfer::testing

namespace wcomm::xfer::testing {
inline void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.label; }
}  // namespace wcomm::xfer::testing
