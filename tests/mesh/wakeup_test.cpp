// The same call sites on both backends: an EventWakeup set from another thread ends
// poll_for_messages early (false, event drained); messages are seen by poll and drained by
// get_all_new_messages; try_send_bytes says false at the high-water mark.
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <memory>
#include <thread>

#include "mesh_fixture.h"
#include "wcomm/errors.h"
#include "wcomm/mesh/event_wakeup.h"
#include "wcomm/mesh/outbox.h"
#include "wcomm/mesh/wcomm_communicator.h"
#include "wcomm/mesh/zmq_communicator.h"

using namespace wcomm;
using namespace wcomm::mesh;
using namespace wcomm::mesh::testing;
using namespace std::chrono_literals;

namespace {

using Factory = std::unique_ptr<Communicator> (*)(const std::string& prefix, const std::string& me,
                                                  std::vector<std::string> push, int hwm);

std::unique_ptr<Communicator> make_zmq(const std::string& prefix, const std::string& me, std::vector<std::string> push,
                                       int hwm) {
  ZmqOptions o{.ipc_socket_path_prefix = prefix};
  if (hwm) o.sndhwm = o.rcvhwm = hwm;
  return std::make_unique<ZmqCommunicator>(me, push, o);
}
std::unique_ptr<Communicator> make_wcomm(const std::string& prefix, const std::string& me,
                                         std::vector<std::string> push, int hwm) {
  WcommOptions o{.ipc_socket_path_prefix = prefix};
  if (hwm) {
    o.sndhwm = hwm;
    o.max_inbox_messages = static_cast<std::size_t>(hwm);
  }
  return std::make_unique<WcommCommunicator>(me, push, o);
}

// RDMA: the wcomm backend over the ucx transport. Its entities listen on ports counted from
// WCOMM_MESH_RDMA_BASE_PORT, picked once for this process (a test's entities must agree).
std::unique_ptr<Communicator> make_wcomm_rdma(const std::string& prefix, const std::string& me,
                                              std::vector<std::string> push, int hwm) {
  static const bool based = [] { return ::setenv("WCOMM_MESH_RDMA_BASE_PORT", tcp_base_port().c_str(), 1) == 0; }();
  (void)based;
  WcommOptions o{.protocol = CommProtocol::kRdma, .ipc_socket_path_prefix = prefix};
  if (hwm) {
    o.sndhwm = hwm;
    o.max_inbox_messages = static_cast<std::size_t>(hwm);
  }
  return std::make_unique<WcommCommunicator>(me, push, o);
}

struct Backend {
  const char* name;
  Factory make;
};
void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

class MeshCallSites : public ::testing::TestWithParam<Backend> {};

TEST_P(MeshCallSites, EventWakeupEndsPollEarly) {
  TempDir dir;
  auto c = GetParam().make(ipc_prefix(dir), "worker_0", {}, 0);
  EventWakeup event;
  c->register_event_for_poll(event.fd());
  const auto start = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);  // the poll should be waiting by then (either way it must end)
    event.set();
  });
  const bool got = c->poll_for_messages(20000);
  const auto waited = std::chrono::steady_clock::now() - start;
  setter.join();
  EXPECT_FALSE(got);
  EXPECT_LT(waited, 10s);          // ended by the event, far before its 20 s timeout
  EXPECT_FALSE(event.drain());     // poll drained it
  // wait_for_work and a blocking get end the same way.
  event.set();
  c->wait_for_work(20000);
  EXPECT_FALSE(event.drain());
  event.set();
  EXPECT_TRUE(c->get_all_new_messages(true, 20.0).empty());
  EXPECT_FALSE(event.drain());
}

TEST_P(MeshCallSites, PollSeesAMessageAndGetDrainsIt) {
  TempDir dir;
  auto a = GetParam().make(ipc_prefix(dir), "worker_0", {"worker_1"}, 0);
  auto b = GetParam().make(ipc_prefix(dir), "worker_1", {"worker_0"}, 0);
  EXPECT_FALSE(b->poll_for_messages(0));
  a->send("worker_1", Dict{{"n", 1}});
  a->send("worker_1", Dict{{"n", 2}});
  ASSERT_TRUE(b->poll_for_messages(10000));
  std::vector<Value> got;
  while (got.size() < 2) {
    auto more = b->get_all_new_messages(true, 10.0);
    ASSERT_FALSE(more.empty());
    got.insert(got.end(), more.begin(), more.end());
  }
  EXPECT_EQ(got[0], Value(Dict{{"n", 1}}));
  EXPECT_EQ(got[1], Value(Dict{{"n", 2}}));
  EXPECT_TRUE(b->get_all_new_messages().empty());
}

TEST_P(MeshCallSites, TrySendSaysFalseAtTheHighWaterMark) {
  TempDir dir;
  // The peer never starts: whatever the backend buffers, sends must stop being taken.
  auto a = GetParam().make(ipc_prefix(dir), "worker_0", {"worker_1"}, 1);
  int taken = 0;
  while (taken < 100 && a->try_send_bytes("worker_1", a->codec().encode(Dict{{"pre", taken}}))) ++taken;
  EXPECT_LT(taken, 100);
  // An outbox queues what try_send refused, in order, and warns past its threshold.
  OutboxCommunicator outbox(*a, 3);
  for (int i = 0; i < 5; ++i) outbox.send("worker_1", Dict{{"i", i}});
  EXPECT_EQ(outbox.backlog("worker_1"), 5u);
  EXPECT_TRUE(outbox.flush());
  // The peer comes: flush drains everything, and it arrives in order.
  auto b = GetParam().make(ipc_prefix(dir), "worker_1", {"worker_0"}, 0);
  std::vector<Value> got;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (got.size() < static_cast<std::size_t>(taken) + 5 && std::chrono::steady_clock::now() < deadline) {
    outbox.flush();
    for (Value& v : b->get_all_new_messages(true, 0.05)) got.push_back(std::move(v));
  }
  ASSERT_EQ(got.size(), static_cast<std::size_t>(taken) + 5);
  EXPECT_FALSE(outbox.flush());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[static_cast<std::size_t>(taken + i)], Value(Dict{{"i", i}}));
}

INSTANTIATE_TEST_SUITE_P(Backends, MeshCallSites,
                         ::testing::Values(Backend{"zmq", &make_zmq}, Backend{"wcomm", &make_wcomm},
                                           Backend{"wcomm_rdma", &make_wcomm_rdma}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MeshWcomm, RdmaRunsOverTheUcxTransport) {
  TempDir dir;
  ScopedEnv base("WCOMM_MESH_RDMA_BASE_PORT", tcp_base_port());
  WcommCommunicator a("worker_0", {"worker_1"}, {.protocol = CommProtocol::kRdma, .ipc_socket_path_prefix = ipc_prefix(dir)});
  WcommCommunicator b("worker_1", {"worker_0"}, {.protocol = CommProtocol::kRdma, .ipc_socket_path_prefix = ipc_prefix(dir)});
  EXPECT_EQ(a.endpoint().rfind("ucx://127.0.0.1:", 0), 0u) << a.endpoint();
  a.send("worker_1", Dict{{"n", 1}});
  b.send("worker_0", Dict{{"n", 2}});
  auto got_b = b.get_all_new_messages(true, 20.0);
  auto got_a = a.get_all_new_messages(true, 20.0);
  ASSERT_EQ(got_b.size(), 1u);
  ASSERT_EQ(got_a.size(), 1u);
  EXPECT_EQ(got_b[0], Value(Dict{{"n", 1}}));
  EXPECT_EQ(got_a[0], Value(Dict{{"n", 2}}));
}

TEST(MeshZmq, RdmaIsRefusedNamingTheWcommBackend) {
  TempDir dir;
  try {
    ZmqCommunicator c("worker_0", {}, {.protocol = CommProtocol::kRdma, .ipc_socket_path_prefix = ipc_prefix(dir)});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no RDMA transport"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("wcomm transport for SHM and RDMA"), std::string::npos) << e.what();
  }
}

TEST(MeshWcomm, ABlockingGetWithNothingThatCouldEndItIsRefused) {
  TempDir dir;
  WcommCommunicator lonely("worker_0", {}, {.ipc_socket_path_prefix = ipc_prefix(dir)});
  try {
    (void)lonely.get_all_new_messages(true);
    FAIL() << "a blocking get with no peers, event or timeout returned";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("has no peers to receive from"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(lonely.get_all_new_messages(true, 0.01).empty());  // with a timeout it just waits
}

TEST(MeshWcomm, UnknownEntityIsNamed) {
  TempDir dir;
  WcommCommunicator c("worker_0", {"worker_1"}, {.ipc_socket_path_prefix = ipc_prefix(dir)});
  try {
    c.send("worker_9", Dict{});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'worker_9'"), std::string::npos) << e.what();
  }
}

}  // namespace
