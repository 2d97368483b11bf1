// Nodes that join at run time (CommConfig::accept_unknown_peers, issue 29 item 1): a node
// that knows nobody adds a dialer that proves the cluster key, at the address its HELLO lists,
// and reports it; an impostor without the key, a join past max_peers and every join while
// joins are off are refused; a node that rejoins under the same name is a new incarnation;
// Comm::create refuses joins that nothing authenticates except on loopback when asked to.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "comm_fixture.h"

namespace {

using namespace wcomm;
using namespace wcomm::testing;

const std::string kJoinKey = "a cluster key of the join tests";

CommConfig joining_config(std::string key = kJoinKey) {
  CommConfig c;
  c.transport = "tcp";
  c.connect_timeout_s = 2;
  c.cluster_key = std::move(key);
  return c;
}

std::shared_ptr<Comm> open_node(const std::string& name, CommConfig config, std::vector<Peer> peers = {}) {
  return Comm::create({{name, "127.0.0.1", 0}, std::move(peers), "127.0.0.1", config});
}

CommConfig accepting_config(std::string key = kJoinKey) {
  CommConfig c = joining_config(std::move(key));
  c.accept_unknown_peers = true;
  return c;
}

Peer address_of_node(const Comm& comm) { return {comm.local().node_id, "127.0.0.1", comm.port()}; }

// The peer events a Comm reported, as "node-b joined" lines, waited for by the test. It goes
// before the Comm (declared after it): its handler is taken back first.
class EventLog {
 public:
  explicit EventLog(Comm& comm) : comm_(comm) {
    comm.on_peer_event([this](const PeerEvent& e) {
      std::lock_guard lock(mu_);
      lines_.push_back(e.node_id + " " + peer_event_name(e.kind));
      cv_.notify_all();
    });
  }
  ~EventLog() { comm_.on_peer_event({}); }
  // Events come within milliseconds of what causes them; the 10 s only guards against a hang.
  bool wait_for(const std::string& line, std::chrono::seconds limit = 10s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return count_locked(line) > 0; });
  }
  int count(const std::string& line) {
    std::lock_guard lock(mu_);
    return count_locked(line);
  }

 private:
  int count_locked(const std::string& line) const { return static_cast<int>(std::count(lines_.begin(), lines_.end(), line)); }
  Comm& comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

std::string text_of(const Received& r) { return std::string(r.value.as<std::string>()); }

// `joiner` (which lists `host` as a peer) says hello; host answers on the joined entry.
void say_hello_both_ways(Comm& host, Comm& joiner, const Peer& host_at_joiner, const std::string& what) {
  wait_value(joiner.send(what, host_at_joiner, {}, {.ack = true}));
  const Peer& joiner_at_host = host.peer(joiner.local().node_id);
  EXPECT_EQ(text_of(wait_value(host.recv(joiner_at_host))), what);
  wait_value(host.send(what + " back", joiner_at_host));
  EXPECT_EQ(text_of(wait_value(joiner.recv(host_at_joiner))), what + " back");
}

// A refused joiner's send fails within its own 3 s (or its 2 s connect window); 20 s only
// guards against a hang.
void expect_refused(Comm& joiner, const Peer& host_at_joiner) {
  const Result<SendResult> r = wait_result(joiner.send("knock", host_at_joiner, {}, {.timeout = Seconds(3), .ack = true}), 20s);
  EXPECT_FALSE(r.ok());
}

TEST(CommJoins, AnUnknownNodeWithTheKeyJoinsAtTheAddressItsHelloLists) {
  auto host = open_node("host", accepting_config());
  EventLog events(*host);
  auto b = open_node("node-b", joining_config());
  const Peer& host_at_b = b->add_peer(address_of_node(*host));
  say_hello_both_ways(*host, *b, host_at_b, "hello");
  EXPECT_TRUE(events.wait_for("node-b joined"));
  EXPECT_TRUE(events.wait_for("node-b up"));
  ASSERT_EQ(host->peers().size(), 1u);
  const Peer joined = host->peers()[0];
  EXPECT_EQ(joined.node_id, "node-b");
  EXPECT_EQ(joined.host, "127.0.0.1");
  EXPECT_EQ(joined.port, b->port());  // where node-b listens, not the port it dialed from
  EXPECT_EQ(events.count("node-b joined"), 1);
}

TEST(CommJoins, AnImpostorWithoutTheKeyOrWithAnotherKeyIsNotAdded) {
  auto host = open_node("host", accepting_config());
  EventLog events(*host);
  auto keyless = open_node("node-b", joining_config(""));
  expect_refused(*keyless, keyless->add_peer(address_of_node(*host)));
  auto other_key = open_node("node-c", joining_config("another key, 16 bytes or more"));
  expect_refused(*other_key, other_key->add_peer(address_of_node(*host)));
  EXPECT_TRUE(host->peers().empty());
  EXPECT_EQ(events.count("node-b joined") + events.count("node-c joined"), 0);
  // The real node-b still gets in afterwards.
  auto b = open_node("node-b", joining_config());
  say_hello_both_ways(*host, *b, b->add_peer(address_of_node(*host)), "the real one");
}

TEST(CommJoins, NoNodeJoinsANodeThatDoesNotAcceptUnknownPeers) {
  auto host = open_node("host", joining_config());
  auto b = open_node("node-b", joining_config());
  expect_refused(*b, b->add_peer(address_of_node(*host)));
  EXPECT_TRUE(host->peers().empty());
}

TEST(CommJoins, AJoinPastMaxPeersIsRefused) {
  CommConfig config = accepting_config();
  config.max_peers = 2;
  auto c = open_node("node-c", joining_config());
  auto host = open_node("host", config, {address_of_node(*c)});  // configured peers count too
  auto b = open_node("node-b", joining_config());
  say_hello_both_ways(*host, *b, b->add_peer(address_of_node(*host)), "second");
  auto d = open_node("node-d", joining_config());
  expect_refused(*d, d->add_peer(address_of_node(*host)));
  EXPECT_EQ(host->peers().size(), 2u);
  // One leaves: there is room again.
  EXPECT_TRUE(host->remove_peer("node-b", "left"));
  say_hello_both_ways(*host, *d, d->peer("host"), "third");
}

TEST(CommJoins, ANodeThatRejoinsUnderTheSameNameIsANewIncarnation) {
  auto host = open_node("host", accepting_config());
  EventLog events(*host);
  auto b1 = open_node("node-b", joining_config());
  say_hello_both_ways(*host, *b1, b1->add_peer(address_of_node(*host)), "first life");
  b1->close();
  auto b2 = open_node("node-b", joining_config());  // another process, another port
  say_hello_both_ways(*host, *b2, b2->add_peer(address_of_node(*host)), "second life");
  EXPECT_TRUE(events.wait_for("node-b restarted"));
  EXPECT_EQ(events.count("node-b joined"), 1);
  EXPECT_EQ(host->peers().size(), 1u);
}

TEST(CommJoins, AJoinedNodeThatWasRemovedJoinsAgainAsANewEntry) {
  auto host = open_node("host", accepting_config());
  EventLog events(*host);
  auto b = open_node("node-b", joining_config());
  EventLog b_events(*b);
  const Peer& host_at_b = b->add_peer(address_of_node(*host));
  say_hello_both_ways(*host, *b, host_at_b, "before");
  const Peer* first = &host->peer("node-b");
  auto pending = host->recv(*first, {.tag = 9});
  ASSERT_TRUE(host->remove_peer("node-b", "evicted"));
  const Result<Received> failed = wait_result(pending);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("peer 'node-b' was removed: evicted"), std::string::npos);
  // node-b redials once it saw its connection end (a send racing the end may not know whether
  // the host had it: DeliveryUnknown, the documented outcome) and joins again.
  ASSERT_TRUE(b_events.wait_for("host down"));
  say_hello_both_ways(*host, *b, host_at_b, "after");
  EXPECT_NE(&host->peer("node-b"), first);
  EXPECT_EQ(events.count("node-b joined"), 2);
}

TEST(CommJoins, CreateRefusesJoinsThatNothingAuthenticates) {
  CommConfig open = joining_config("");
  open.accept_unknown_peers = true;
  try {
    open_node("host", open);
    FAIL() << "accept_unknown_peers without a key or TLS was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("needs comm.cluster_key"), std::string::npos) << e.what();
  }
  open.allow_unauthenticated_joins = true;
  try {
    Comm::create({{"host", "0.0.0.0", 0}, {}, "0.0.0.0", open});
    FAIL() << "unauthenticated joins on a network address were accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'0.0.0.0', which is not loopback"), std::string::npos) << e.what();
  }
  CommConfig no_accept = joining_config("");
  no_accept.allow_unauthenticated_joins = true;
  EXPECT_THROW(open_node("host", no_accept), InvalidArgumentError);
  // On loopback, asked for explicitly: a node without a key joins.
  auto host = open_node("host", open);
  auto b = open_node("node-b", joining_config(""));
  say_hello_both_ways(*host, *b, b->add_peer(address_of_node(*host)), "local");
}

}  // namespace
