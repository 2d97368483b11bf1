// Dialing: every address of a peer in turn, one deadline for connect and handshake, and a
// peer that refuses connections reported in about 2 s (as V0.1), not after connect_timeout_s.
#include <chrono>
#include <filesystem>

#include "comm_fixture.h"

namespace wcomm::testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(CommDial, RefusedPeerFailsInAboutTwoSecondsNotTheConnectTimeout) {
  CommConfig config;
  config.connect_timeout_s = 30;
  ReservedPort port_a, port_ghost;  // nothing ever listens on the ghost's port
  auto a = Comm::create({{"node-a", "127.0.0.1", port_a.port()}, {{"ghost", "127.0.0.1", port_ghost.port()}},
                         "127.0.0.1", config});
  const auto start = Clock::now();
  auto r = wait_result(a->send(Value(1), a->peer("ghost")), 10s);
  const double took = seconds_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConnectionFailed);
  EXPECT_NE(r.error().message.find("refused"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("tcp://127.0.0.1:"), std::string::npos) << r.error().message;
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 5.0);
}

TEST(CommDial, AListenerThatNeverAnswersFailsAtTheConnectTimeout) {
  ReservedPort port_a;
  MuteListener mute;
  auto a = comm_dialing_mute(mute, 0.5, port_a);
  const auto start = Clock::now();
  auto r = wait_result(a->send(Value(1), a->peer("mute")), 10s);
  const double took = seconds_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConnectionFailed);
  EXPECT_NE(r.error().message.find("within 0.5 s"), std::string::npos) << r.error().message;
  EXPECT_LT(took, 3.0);
}

TEST(CommDial, TheNextAddressIsTriedWhenOneRefuses) {
  ReservedPort port_a, port_dead;
  char dir[] = "/tmp/wcomm-dial-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const Address b_unix = Address::parse(std::string("unix://") + dir + "/b.sock");
  // node-b is listed at a dead tcp port first, then at the unix socket it listens on.
  Peer b_as_seen{"node-b", "", 0, {Address::tcp("127.0.0.1", port_dead.port()), b_unix}};
  Peer a_as_seen{"node-a", "127.0.0.1", port_a.port()};
  auto a = Comm::create({a_as_seen, {b_as_seen}, "127.0.0.1", {}});
  auto b = Comm::create({{"node-b", "", 0, {b_unix}}, {a_as_seen}, "", {}});
  wait_value(a->send(Value("over unix"), a->peer("node-b")));
  EXPECT_EQ(wait_value(b->recv(b->peer("node-a"))).value, Value("over unix"));
  a.reset();
  b.reset();
  ::rmdir(dir);
}

TEST(CommDial, APeerWithoutAnyAddressIsRefusedAtCreate) {
  EXPECT_THROW(Comm::create({{"node-a", "127.0.0.1", 0}, {{"node-b", "", 0}}, "127.0.0.1", {}}), InvalidArgumentError);
}

TEST(CommDial, ListensOnEveryLocalAddress) {
  char dir[] = "/tmp/wcomm-dial-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/a.sock";
  auto a = Comm::create({{"node-a", "", 0, {Address::tcp("127.0.0.1", 0), Address::parse("unix://" + path)}},
                         {{"node-b", "", 0, {Address::parse("unix://@wcomm-dial-test-b")}}},
                         "",
                         {}});
  const auto addresses = a->addresses();
  ASSERT_EQ(addresses.size(), 2u);
  EXPECT_NE(addresses[0].port, 0);  // the ephemeral port, resolved
  EXPECT_EQ(a->port(), addresses[0].port);
  EXPECT_EQ(addresses[1].path, path);
  EXPECT_TRUE(RawClient(a->port()).connected());
  a->close();
  EXPECT_FALSE(std::filesystem::exists(path)) << "the socket file is removed on close";
  ::rmdir(dir);
}

}  // namespace
}  // namespace wcomm::testing
