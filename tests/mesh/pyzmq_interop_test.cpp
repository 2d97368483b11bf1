// A pyzmq entity (tests/mesh/pyzmq_entity.py, Debian's python3-zmq) and this process's
// ZmqCommunicator form one mesh over IPC and over TCP: recv_pyobj reads what wcomm sent and
// wcomm decodes what send_pyobj wrote.
#include <gtest/gtest.h>

#include <chrono>

#include "mesh_fixture.h"
#include "wcomm/mesh/zmq_communicator.h"

using namespace wcomm;
using namespace wcomm::mesh;
using namespace wcomm::mesh::testing;
using namespace std::chrono_literals;

namespace {

Value cpp_sample(int i) {
  return Dict{{"seq", i},
              {"from", "wcomm"},
              {"blob", Bytes(std::string(static_cast<std::size_t>(i % 7), '\x01'))},
              {"f", -0.5 * i},
              {"t", Tuple{i, List{}, Dict{{"k", None{}}}}},
              {"big", (std::int64_t{1} << 50) * (i % 2 ? -1 : 1)}};
}

// What pyzmq_entity.py's sample(i) is.
Value python_sample(int i) {
  return Dict{{"seq", i},
              {"text", "h\xc3\xa9llo"},
              {"blob", Bytes(std::string(3, static_cast<char>(i % 256)))},
              {"pi", 3.25},
              {"big", (std::int64_t{1} << 40) + i},
              {"neg", -7 - i},
              {"tuple", Tuple{1, "a", None{}}},
              {"list", List{true, false, None{}, 1.5}},
              {"u64", (std::uint64_t{1} << 63) + static_cast<std::uint64_t>(i)},
              {"nested", Dict{{"k", List{1, Dict{{"x", Bytes(std::string())}}}}}}};
}

class MeshPyzmqInterop : public ::testing::TestWithParam<CommProtocol> {};

TEST_P(MeshPyzmqInterop, ExchangeBothWays) {
  TempDir dir;
  const std::string prefix = ipc_prefix(dir);
  ScopedEnv base("MSTAR_ZMQ_TCP_BASE_PORT", tcp_base_port());
  const int n = 50;
  ZmqCommunicator me("api_server", {"worker_0"}, {.protocol = GetParam(), .ipc_socket_path_prefix = prefix});
  Process py = Process::spawn({"/usr/bin/python3", kPyzmqEntity, protocol_arg(GetParam()), prefix, "worker_0",
                               "api_server", "echo_then_send", std::to_string(n)},
                              dir.path(), "pyzmq");
  // ZeroMQ queues what is sent before the peer binds, as a pyzmq entity's sends would.
  for (int i = 0; i < n; ++i) me.send("worker_0", cpp_sample(i));

  std::vector<Value> echoes, originals;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((echoes.size() < n || originals.size() < n) && std::chrono::steady_clock::now() < deadline) {
    for (Value& v : me.get_all_new_messages(true, 0.5)) {
      if (v.as<Dict>().find("echo")) echoes.push_back(std::move(v));
      else originals.push_back(std::move(v));
    }
  }
  ASSERT_EQ(echoes.size(), n) << py.output();
  ASSERT_EQ(originals.size(), n) << py.output();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(*echoes[i].as<Dict>().find("echo"), cpp_sample(i)) << i;
    EXPECT_EQ(*echoes[i].as<Dict>().find("by"), Value("worker_0"));
    EXPECT_EQ(originals[i], python_sample(i)) << i << ": " << summarize(originals[i]);
  }
  me.send("worker_0", Dict{{"ok", n}});
  ASSERT_EQ(py.wait_for(30s), 0) << py.output();
  EXPECT_NE(py.out().find("ok 50"), std::string::npos) << py.output();
}

INSTANTIATE_TEST_SUITE_P(Protocols, MeshPyzmqInterop, ::testing::Values(CommProtocol::kIpc, CommProtocol::kTcp),
                         [](const auto& info) { return std::string(protocol_name(info.param)); });

}  // namespace
