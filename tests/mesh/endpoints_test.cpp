// The endpoint rules a pyzmq mesh uses (mesh-zmq.md), and their environment overrides.
#include <gtest/gtest.h>

#include <string>

#include "mesh_fixture.h"
#include "wcomm/errors.h"
#include "wcomm/mesh/endpoints.h"

using namespace wcomm;
using namespace wcomm::mesh;

using wcomm::mesh::testing::ScopedEnv;

TEST(MeshEndpoints, TcpPortsFollowTheEntityNames) {
  EXPECT_EQ(tcp_port_for("api_server", 19000), 19000);
  EXPECT_EQ(tcp_port_for("conductor", 19000), 19001);
  EXPECT_EQ(tcp_port_for("api_server_preprocess_worker", 19000), 19002);
  EXPECT_EQ(tcp_port_for("worker_0", 19000), 19100);
  EXPECT_EQ(tcp_port_for("worker_17", 19000), 19117);
  // Not all digits after worker_: the byte-sum rule ("worker_x": 119+111+114+107+101+114+95+120).
  EXPECT_EQ(tcp_port_for("worker_x", 19000), 19000 + 1000 + (119 + 111 + 114 + 107 + 101 + 114 + 95 + 120) % 1000);
  EXPECT_EQ(tcp_port_for("tokenizer", 19000), 19000 + 1000 + 987);  // sum(b"tokenizer") % 1000
  EXPECT_THROW(tcp_port_for("worker_99999", 19000), InvalidArgumentError);
}

TEST(MeshEndpoints, IpcPathKeepsPyzmqsDoubleSlash) {
  EXPECT_EQ(zmq_endpoint("conductor", CommProtocol::kIpc, "/tmp/mstar/"), "ipc:///tmp/mstar//conductor.ipc");
  EXPECT_EQ(zmq_endpoint("worker_1", CommProtocol::kIpc, "/run/x"), "ipc:///run/x/worker_1.ipc");
  EXPECT_THROW(zmq_endpoint("conductor", CommProtocol::kShm, "/tmp/mstar/"), InvalidArgumentError);
}

TEST(MeshEndpoints, TcpHostAndBaseFromTheEnvironment) {
  ScopedEnv host("MSTAR_ZMQ_TCP_HOST", "127.0.0.2");
  ScopedEnv base("MSTAR_ZMQ_TCP_BASE_PORT", "30000");
  EXPECT_EQ(zmq_endpoint("conductor", CommProtocol::kTcp, ""), "tcp://127.0.0.2:30001");
  ScopedEnv bad("MSTAR_ZMQ_TCP_BASE_PORT", "30k");
  try {
    zmq_endpoint("conductor", CommProtocol::kTcp, "");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("MSTAR_ZMQ_TCP_BASE_PORT='30k'"), std::string::npos) << e.what();
  }
}

TEST(MeshEndpoints, TransportOverride) {
  EXPECT_EQ(transport_from_env(CommProtocol::kIpc), CommProtocol::kIpc);
  {
    ScopedEnv t("MSTAR_ZMQ_TRANSPORT", "tcp");
    EXPECT_EQ(transport_from_env(CommProtocol::kIpc), CommProtocol::kTcp);
  }
  ScopedEnv t("MSTAR_ZMQ_TRANSPORT", "carrier-pigeon");
  EXPECT_THROW(transport_from_env(CommProtocol::kIpc), InvalidArgumentError);
}

TEST(MeshEndpoints, WcommTransportEndpoints) {
  EXPECT_EQ(wcomm_endpoint("conductor", CommProtocol::kShm, "/tmp/m"), "shm:///tmp/m/conductor.wcomm");
  EXPECT_EQ(wcomm_endpoint("conductor", CommProtocol::kIpc, "/tmp/m"), "unix:///tmp/m/conductor.wcomm");
  {
    ScopedEnv base("WCOMM_MESH_RDMA_BASE_PORT", "24000");
    ScopedEnv host("MSTAR_ZMQ_TCP_HOST", "10.0.0.7");
    EXPECT_EQ(wcomm_endpoint("conductor", CommProtocol::kRdma, "/tmp/m"), "ucx://10.0.0.7:24001");
    EXPECT_EQ(wcomm_endpoint("worker_3", CommProtocol::kRdma, "/tmp/m"), "ucx://10.0.0.7:24103");
  }
  ::unsetenv("WCOMM_MESH_RDMA_BASE_PORT");
  EXPECT_EQ(wcomm_endpoint("api_server", CommProtocol::kRdma, "/tmp/m"), "ucx://127.0.0.1:23000");
  ScopedEnv bad("WCOMM_MESH_RDMA_BASE_PORT", "0");
  EXPECT_THROW(wcomm_endpoint("api_server", CommProtocol::kRdma, "/tmp/m"), InvalidArgumentError);
}
