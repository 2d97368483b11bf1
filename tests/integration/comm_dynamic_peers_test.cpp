// Peers that join and leave at run time (Comm::add_peer / remove_peer, issue 29): join, leave
// with pending operations, a connection from a removed peer refused, rejoin under the same
// name (the same process back, and a new one), bad input, and changes racing traffic.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "comm_fixture.h"

namespace {

using namespace wcomm;
using namespace wcomm::testing;

// A node that starts knowing nobody (TCP on loopback, tcp only: every peer dials the port).
std::shared_ptr<Comm> node_knowing_nobody(const std::string& name, CommConfig config = {}) {
  config.transport = "tcp";
  config.connect_timeout_s = 2;
  return Comm::create({{name, "127.0.0.1", 0}, {}, "127.0.0.1", config});
}

Peer reach_of(const Comm& comm) { return {comm.local().node_id, "127.0.0.1", comm.port()}; }

std::string text_received(const Received& r) { return std::string(r.value.as<std::string>()); }

void exchange_both_ways(Comm& a, const Peer& b_at_a, Comm& b, const Peer& a_at_b, const std::string& what) {
  wait_value(a.send(what + " a->b", b_at_a));
  EXPECT_EQ(text_received(wait_value(b.recv(a_at_b))), what + " a->b");
  wait_value(b.send(what + " b->a", a_at_b));
  EXPECT_EQ(text_received(wait_value(a.recv(b_at_a))), what + " b->a");
}

TEST(CommDynamicPeers, TwoNodesThatKnewNobodyJoinAndExchange) {
  auto a = node_knowing_nobody("node-a"), b = node_knowing_nobody("node-b");
  EXPECT_TRUE(a->peers().empty());
  const Peer& b_at_a = a->add_peer(reach_of(*b));
  const Peer& a_at_b = b->add_peer(reach_of(*a));
  exchange_both_ways(*a, b_at_a, *b, a_at_b, "joined");
  ASSERT_EQ(a->peers().size(), 1u);
  EXPECT_EQ(a->peers()[0].node_id, "node-b");
  EXPECT_EQ(&a->peer("node-b"), &b_at_a);
  EXPECT_EQ(a->stats().peers.count("node-b"), 1u);
}

TEST(CommDynamicPeers, AddPeerRefusesWhatCreateRefuses) {
  auto a = node_knowing_nobody("node-a"), b = node_knowing_nobody("node-b");
  EXPECT_THROW(a->add_peer({"", "127.0.0.1", 9}), InvalidArgumentError);
  EXPECT_THROW(a->add_peer({"node-a", "127.0.0.1", 9}), InvalidArgumentError);  // itself
  EXPECT_THROW(a->add_peer({"node-c", "127.0.0.1", 0}), InvalidArgumentError);  // no port
  EXPECT_THROW(a->add_peer({"node-c"}), InvalidArgumentError);                  // no address
  a->add_peer(reach_of(*b));
  try {
    a->add_peer(reach_of(*b));
    FAIL() << "a second node-b was added";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("there already"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(a->remove_peer("node-z"));
  a->close();
  EXPECT_THROW(a->add_peer({"node-d", "127.0.0.1", 9}), ClosedError);
}

TEST(CommDynamicPeers, ALeavingPeersPendingOperationsFailWithTheReason) {
  auto a = node_knowing_nobody("node-a"), b = node_knowing_nobody("node-b");
  const Peer& b_at_a = a->add_peer(reach_of(*b));
  const Peer& a_at_b = b->add_peer(reach_of(*a));
  exchange_both_ways(*a, b_at_a, *b, a_at_b, "before");
  auto pending = a->recv(b_at_a, {.tag = 7});
  EXPECT_TRUE(a->remove_peer("node-b", "scaled down"));
  const Result<Received> r = wait_result(pending);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kClosed);
  EXPECT_NE(r.error().message.find("peer 'node-b' was removed: scaled down"), std::string::npos) << r.error().message;
  // Named again, through the Peer& kept from before (still valid): an unknown peer now.
  const Result<SendResult> again = wait_result(a->send("late", b_at_a));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(again.error().message.find("unknown peer 'node-b'"), std::string::npos) << again.error().message;
  EXPECT_THROW(a->peer("node-b"), std::out_of_range);
  EXPECT_TRUE(a->peers().empty());
  // node-b still knows node-a, whose door is now shut to it: its sends fail (not hang). The
  // contract is the send's own 3 s timeout (or the refused handshake, sooner); 20 s is only
  // the test's guard against a hang.
  const Result<SendResult> refused = wait_result(b->send("knock", a_at_b, {}, {.timeout = Seconds(3), .ack = true}), 20s);
  EXPECT_FALSE(refused.ok());
}

TEST(CommDynamicPeers, APeerRemovedAndAddedAgainIsANewSession) {
  auto a = node_knowing_nobody("node-a"), b = node_knowing_nobody("node-b");
  const Peer& b_at_a = a->add_peer(reach_of(*b));
  const Peer& a_at_b = b->add_peer(reach_of(*a));
  exchange_both_ways(*a, b_at_a, *b, a_at_b, "first");
  ASSERT_TRUE(a->remove_peer("node-b"));
  const Peer& b_again = a->add_peer(reach_of(*b));
  EXPECT_NE(&b_again, &b_at_a);  // a new entry; the old reference stays valid
  exchange_both_ways(*a, b_again, *b, a_at_b, "second");
}

TEST(CommDynamicPeers, ANewProcessUnderTheSameNameTakesTheOldOnesPlace) {
  auto a = node_knowing_nobody("node-a");
  auto b1 = node_knowing_nobody("node-b");
  const Peer& a_at_b1 = b1->add_peer(reach_of(*a));
  exchange_both_ways(*a, a->add_peer(reach_of(*b1)), *b1, a_at_b1, "old");
  b1->close();
  auto b2 = node_knowing_nobody("node-b");  // a new incarnation, on another port
  ASSERT_TRUE(a->remove_peer("node-b", "replaced"));
  const Peer& a_at_b2 = b2->add_peer(reach_of(*a));
  exchange_both_ways(*a, a->add_peer(reach_of(*b2)), *b2, a_at_b2, "new");
}

TEST(CommDynamicPeers, ChangesRaceTrafficToOtherPeers) {
  // One thread streams to node-b while another adds and removes node-c again and again: the
  // directory is read without a lock (TSan checks the publication), and no message is lost.
  auto a = node_knowing_nobody("node-a"), b = node_knowing_nobody("node-b"), c = node_knowing_nobody("node-c");
  const Peer& b_at_a = a->add_peer(reach_of(*b));
  const Peer& a_at_b = b->add_peer(reach_of(*a));
  constexpr int kMessages = 300;
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i) wait_value(a->send(static_cast<std::int64_t>(i), b_at_a));
  });
  for (int round = 0; round < 50; ++round) {
    a->add_peer(reach_of(*c));
    EXPECT_TRUE(a->remove_peer("node-c"));
  }
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(wait_value(b->recv(a_at_b)).value.as<std::int64_t>(), i);
  sender.join();
}

}  // namespace
