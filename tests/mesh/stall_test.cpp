// The two-entity deadlock, in two processes: each sends to the other at a high-water mark of 1
// while reading between sends. Through OutboxCommunicator both complete; with blocking sends
// both stall in send (the test bounds the wait, then kills them). On both backends.
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>

#include "mesh_fixture.h"

using namespace wcomm::mesh;
using namespace wcomm::mesh::testing;
using namespace std::chrono_literals;

namespace {

class MeshStall : public ::testing::TestWithParam<BackendCase> {
 protected:
  // Starts both entities flooding each other with `count` 64 KiB messages at HWM 1.
  std::pair<Process, Process> start(const TempDir& dir, const char* send_mode, int count) {
    auto peer = [&](const char* me, const char* other) {
      return Process::spawn({kMeshPeer, GetParam().backend, protocol_arg(GetParam().protocol), ipc_prefix(dir), me,
                             other, "flood", std::to_string(count), "65536", "1", send_mode},
                            dir.path(), std::string(me) + "-" + send_mode);
    };
    return {peer("worker_0", "worker_1"), peer("worker_1", "worker_0")};
  }
};

TEST_P(MeshStall, OutboxCompletes) {
  TempDir dir;
  ScopedEnv base("MSTAR_ZMQ_TCP_BASE_PORT", tcp_base_port());
  ScopedEnv wbase("WCOMM_MESH_TCP_BASE_PORT", tcp_base_port());
  ScopedEnv rbase("WCOMM_MESH_RDMA_BASE_PORT", tcp_base_port());
  auto [a, b] = start(dir, "outbox", 2000);
  ASSERT_EQ(a.wait_for(60s), 0) << a.output();
  ASSERT_EQ(b.wait_for(60s), 0) << b.output();
  EXPECT_NE(a.out().find("done"), std::string::npos);
  EXPECT_NE(b.out().find("done"), std::string::npos);
}

TEST_P(MeshStall, BlockingSendsStall) {
  TempDir dir;
  ScopedEnv base("MSTAR_ZMQ_TCP_BASE_PORT", tcp_base_port());
  ScopedEnv wbase("WCOMM_MESH_TCP_BASE_PORT", tcp_base_port());
  ScopedEnv rbase("WCOMM_MESH_RDMA_BASE_PORT", tcp_base_port());
  auto [a, b] = start(dir, "blocking", 2000);
  // Neither can finish: each waits in send for the other, which waits in send too. After 3 s
  // without an exit, both must be sleeping (blocked, not busy) with sends still to make.
  EXPECT_FALSE(a.wait_for(3s).has_value()) << a.output();
  EXPECT_FALSE(b.wait_for(1ms).has_value()) << b.output();
  EXPECT_EQ(a.out().find("done"), std::string::npos);
  EXPECT_EQ(b.out().find("done"), std::string::npos);
  const std::string progress = a.err();
  EXPECT_EQ(progress.find("sent 1984 "), std::string::npos) << "the sends went through: " << progress.substr(progress.size() > 200 ? progress.size() - 200 : 0);
  a.kill();
  b.kill();
}

INSTANTIATE_TEST_SUITE_P(Backends, MeshStall,
                         ::testing::Values(BackendCase{"zmq", CommProtocol::kIpc}, BackendCase{"wcomm", CommProtocol::kShm},
                                           BackendCase{"wcomm", CommProtocol::kRdma}),
                         [](const auto& info) {
                           const std::string name = info.param.backend;
                           return info.param.protocol == CommProtocol::kRdma ? name + "_RDMA" : name;
                         });

}  // namespace
