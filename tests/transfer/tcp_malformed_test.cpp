// The tcp backend refuses a malformed header or ack with a reason that names the field, where
// it used to read a missing field as 0 / "" (an ack with no 'follows' completed a READ whose
// bytes never came; a header with no 'op' was served as a READ). One side is a real Agent, the
// other this test speaking the backend's messages by hand over a bare Comm.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "process_util.h"
#include "transfer/metadata.h"
#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"

namespace wcomm::xfer {
namespace {

using namespace std::chrono_literals;

// The tcp backend's request and ack tags (src/transfer/tcp_backend.cpp).
constexpr std::uint32_t kRequestTag = kFirstReservedTag + 1;
constexpr std::uint32_t kAckTag = kFirstReservedTag + 3;

std::uint64_t addr(const std::vector<std::uint8_t>& v) { return reinterpret_cast<std::uint64_t>(v.data()); }

// Two Comms that list each other: node-a and node-b.
struct CommPair {
  std::shared_ptr<Comm> a, b;
  CommPair() {
    auto ports = wcomm::testing::free_tcp_ports(2);
    const Peer pa{"node-a", "127.0.0.1", ports[0]}, pb{"node-b", "127.0.0.1", ports[1]};
    a = Comm::create({.local = pa, .peers = {pb}});
    b = Comm::create({.local = pb, .peers = {pa}});
  }
  ~CommPair() {
    a->close();
    b->close();
  }
};

TEST(TcpBackend, AnAckWithoutFollowsFailsTheReadInsteadOfCompletingIt) {
  CommPair comms;
  std::vector<std::uint8_t> local(4096, 0), remote(4096, 7);
  auto a = Agent::create({.name = "a", .backend = BackendKind::kTcp, .comm = comms.a});
  ASSERT_TRUE(a->register_memory(local.data(), local.size()).ok());
  AgentMetadata b{.name = "b", .generation = 1, .host_id = "another-host", .comm_node = "node-b",
                  .regions = {{addr(remote), remote.size(), 0}}};
  ASSERT_TRUE(a->add_remote(encode_metadata(b)).ok());
  auto h = a->post(Op::kRead, {{addr(local), local.size(), 0}}, "b", {{addr(remote), remote.size(), 0}});
  ASSERT_TRUE(h.ok()) << h.error().message;

  // Play agent b: take the request, then accept it without saying whether the bytes follow.
  // (The 10 s timeouts below only keep a broken build from hanging: on loopback each step takes
  // milliseconds, and no assertion depends on how long one takes.)
  const Peer& node_a = comms.b->peer("node-a");
  Received request = comms.b->recv(node_a, {.tag = kRequestTag, .timeout = 10s}).get();
  const Value* id = request.value.as<Dict>().find("id");
  ASSERT_NE(id, nullptr);
  comms.b->send(Dict{{"id", *id}, {"ok", true}, {"reason", ""}}, node_a, {}, {.tag = kAckTag, .timeout = 10s}).get();

  XferStatus s = a->wait(h.value(), 10s);
  EXPECT_STREQ(xfer_state_name(s.state), "error") << "a READ whose bytes never came was reported done";
  EXPECT_NE(s.reason.find("malformed ack"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("field 'follows' is missing"), std::string::npos) << s.reason;
  EXPECT_EQ(local, std::vector<std::uint8_t>(4096, 0));
}

TEST(TcpBackend, AHeaderWithoutAnOpIsRefusedNotServedAsARead) {
  CommPair comms;
  std::vector<std::uint8_t> memory(4096, 7);
  auto b = Agent::create({.name = "b", .backend = BackendKind::kTcp, .comm = comms.b});
  ASSERT_TRUE(b->register_memory(memory.data(), memory.size()).ok());

  // Play the initiator: a well-formed READ header but for its missing op.
  const Peer& node_b = comms.a->peer("node-b");
  Dict header{{"id", 7}, {"to_generation", b->generation()},
              {"descs", Bytes(encode_descs({{addr(memory), memory.size(), 0}}))}};
  comms.a->send(std::move(header), node_b, {}, {.tag = kRequestTag, .timeout = 10s}).get();

  Received got = comms.a->recv(node_b, {.tag = kAckTag, .timeout = 10s}).get();
  const Dict& ack = got.value.as<Dict>();
  EXPECT_EQ(summarize(got.value), summarize(Dict{{"id", 7}, {"ok", false},
                                                 {"reason", "malformed request: field 'op' is missing"},
                                                 {"follows", false}}))
      << "a header with no op was served as a READ";
}

}  // namespace
}  // namespace wcomm::xfer
