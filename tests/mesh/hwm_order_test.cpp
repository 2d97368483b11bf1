// At the high-water mark nothing is dropped or reordered: 10^5 messages from one process to
// another at HWM 1, every sequence number checked by the receiver. On both backends, and over
// RDMA (Comm's ucx transport).
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>

#include "mesh_fixture.h"
#include "sanitized.h"

using namespace wcomm::mesh;
using namespace wcomm::mesh::testing;
using namespace std::chrono_literals;

namespace {

class MeshHwmOrder : public ::testing::TestWithParam<BackendCase> {};

TEST_P(MeshHwmOrder, HundredThousandInOrder) {
  TempDir dir;
  ScopedEnv base("MSTAR_ZMQ_TCP_BASE_PORT", tcp_base_port());
  ScopedEnv wbase("WCOMM_MESH_TCP_BASE_PORT", tcp_base_port());
  ScopedEnv rbase("WCOMM_MESH_RDMA_BASE_PORT", tcp_base_port());
  // 10^5 in the Release pass (the figure); sanitizer builds check 2 x 10^4.
  const std::string n = wcomm::testing::kSanitized ? "20000" : "100000";
  const std::string backend = GetParam().backend, protocol = protocol_arg(GetParam().protocol);
  Process receiver = Process::spawn(
      {kMeshPeer, backend, protocol, ipc_prefix(dir), "worker_1", "worker_0", "recvseq", n, "1"}, dir.path(), "recv");
  Process sender = Process::spawn(
      {kMeshPeer, backend, protocol, ipc_prefix(dir), "worker_0", "worker_1", "send", n, "1"}, dir.path(), "send");
  ASSERT_EQ(receiver.wait_for(120s), 0) << receiver.output() << sender.output();
  ASSERT_EQ(sender.wait_for(30s), 0) << sender.output();
  EXPECT_NE(receiver.out().find("ok " + n), std::string::npos) << receiver.output();
}

INSTANTIATE_TEST_SUITE_P(Backends, MeshHwmOrder,
                         ::testing::Values(BackendCase{"zmq", CommProtocol::kIpc}, BackendCase{"zmq", CommProtocol::kTcp},
                                           BackendCase{"wcomm", CommProtocol::kShm}, BackendCase{"wcomm", CommProtocol::kTcp},
                                           BackendCase{"wcomm", CommProtocol::kRdma}),
                         [](const auto& info) {
                           return std::string(info.param.backend) + "_" + protocol_name(info.param.protocol);
                         });

}  // namespace
