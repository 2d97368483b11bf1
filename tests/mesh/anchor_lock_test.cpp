// The deployment anchor lock: a second conductor of a deployment is refused at once with the
// holder's pid; a SIGKILLed conductor leaves the deployment free for the next one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>

#include "mesh_fixture.h"
#include "wcomm/errors.h"
#include "wcomm/mesh/anchor_lock.h"
#include "wcomm/mesh/wcomm_communicator.h"
#include "wcomm/mesh/zmq_communicator.h"

using namespace wcomm;
using namespace wcomm::mesh;
using namespace wcomm::mesh::testing;
using namespace std::chrono_literals;

namespace {

class MeshAnchorLock : public ::testing::TestWithParam<const char*> {};

TEST_P(MeshAnchorLock, SecondConductorRefusedAndFreedAfterSigkill) {
  TempDir dir;
  const std::string backend = GetParam();
  auto conductor = [&](const std::string& name) {
    return Process::spawn({kMeshPeer, backend, backend == "zmq" ? "IPC" : "SHM", ipc_prefix(dir), "conductor",
                           "worker_0", "anchor"},
                          dir.path(), name);
  };
  Process first = conductor("first");
  // "ready" comes once it holds the lock and its socket.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (first.out().find("ready") == std::string::npos && first.running() && std::chrono::steady_clock::now() < deadline)
    first.wait_for(10ms);
  ASSERT_NE(first.out().find("ready"), std::string::npos) << first.output();

  Process second = conductor("second");
  ASSERT_EQ(second.wait_for(20s), 1) << second.output();
  EXPECT_NE(second.err().find("held by pid " + std::to_string(first.pid())), std::string::npos) << second.output();

  ASSERT_TRUE(first.kill().has_value());
  Process third = conductor("third");
  const auto deadline3 = std::chrono::steady_clock::now() + 20s;
  while (third.out().find("ready") == std::string::npos && third.running() && std::chrono::steady_clock::now() < deadline3)
    third.wait_for(10ms);
  EXPECT_NE(third.out().find("ready"), std::string::npos) << third.output();
  third.kill();
}

INSTANTIATE_TEST_SUITE_P(Backends, MeshAnchorLock, ::testing::Values("zmq", "wcomm"),
                         [](const auto& info) { return std::string(info.param); });

TEST(MeshAnchorLockInProcess, OnlyTheConductorLocksAndTheLockFileSitsBesideTheEndpoint) {
  TempDir dir;
  ZmqCommunicator conductor("conductor", {}, {.ipc_socket_path_prefix = ipc_prefix(dir)});
  EXPECT_EQ(anchor_lock_path(conductor.endpoint()), ipc_prefix(dir) + "/conductor.ipc.lock");
  EXPECT_THROW(AnchorLock(conductor.endpoint()), InvalidArgumentError);
  // Workers take no lock: two processes' workers of different names coexist anyway, and a
  // worker's name is no deployment's anchor.
  ZmqCommunicator worker("worker_0", {}, {.ipc_socket_path_prefix = ipc_prefix(dir)});
  AnchorLock other_deployment("tcp://127.0.0.1:1");
  EXPECT_EQ(other_deployment.path(), "/tmp/mstar-anchor-tcp___127.0.0.1_1.lock");
}

}  // namespace
