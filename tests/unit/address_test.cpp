// Addresses (wcomm/address.h) and the YAML `address:` / `addresses:` keys of a node.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "wcomm/address.h"
#include "wcomm/config.h"
#include "wcomm/errors.h"

namespace wcomm {
namespace {

std::string address_error(const std::string& text, bool allow_port_zero = false) {
  try {
    Address::parse(text, allow_port_zero);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted " << text;
  return "";
}

TEST(Address, ParsesEachForm) {
  const Address tcp = Address::parse("tcp://192.0.2.11:9000");
  EXPECT_EQ(tcp.scheme, "tcp");
  EXPECT_EQ(tcp.host, "192.0.2.11");
  EXPECT_EQ(tcp.port, 9000);
  const Address v6 = Address::parse("tcp://[::1]:9001");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 9001);
  EXPECT_EQ(Address::parse("tcp://board-b.local:1").host, "board-b.local");
  const Address path = Address::parse("unix:///run/wcomm/a.sock");
  EXPECT_EQ(path.scheme, "unix");
  EXPECT_EQ(path.path, "/run/wcomm/a.sock");
  EXPECT_FALSE(path.abstract);
  const Address abstract = Address::parse("unix://@wcomm-a");
  EXPECT_TRUE(abstract.abstract);
  EXPECT_EQ(abstract.path, "wcomm-a");
}

TEST(Address, PrintsWhatItParses) {
  for (const char* text : {"tcp://192.0.2.11:9000", "tcp://[::1]:9001", "unix:///tmp/x.sock", "unix://@name",
                           "ucx://192.0.2.11:23000", "ucx://[::1]:23001"})
    EXPECT_EQ(Address::parse(text).to_string(), text);
  EXPECT_EQ(Address::tcp("127.0.0.1", 5).to_string(), "tcp://127.0.0.1:5");
}

TEST(Address, BadAddressesNameTheTextAndTheProblem) {
  EXPECT_NE(address_error("192.0.2.11:9000").find("no scheme"), std::string::npos);
  EXPECT_NE(address_error("udp://h:1").find("unknown scheme 'udp'"), std::string::npos);
  EXPECT_NE(address_error("tcp://h").find("no port"), std::string::npos);
  EXPECT_NE(address_error("tcp://:9000").find("empty host"), std::string::npos);
  EXPECT_NE(address_error("tcp://h:70000").find("'70000'"), std::string::npos);
  EXPECT_NE(address_error("tcp://h:x1").find("'x1'"), std::string::npos);
  EXPECT_NE(address_error("tcp://::1:9").find("[brackets]"), std::string::npos);
  EXPECT_NE(address_error("tcp://h:0").find("port 0"), std::string::npos);
  EXPECT_NE(address_error("ucx://h").find("no port"), std::string::npos);
  EXPECT_NE(address_error("ucx://h:1/x").find("'1/x'"), std::string::npos);
  EXPECT_EQ(Address::parse("tcp://h:0", /*allow_port_zero=*/true).port, 0);
  EXPECT_NE(address_error("unix://relative/path").find("absolute"), std::string::npos);
  EXPECT_NE(address_error("unix://@").find("empty abstract"), std::string::npos);
  EXPECT_NE(address_error("unix:///" + std::string(200, 'x')).find("longer than 107"), std::string::npos);
  const std::string message = address_error("tcp://h");
  EXPECT_NE(message.find("'tcp://h'"), std::string::npos) << message;
}

TEST(Address, PeerEndpointsDefaultToV01HostAndPort) {
  const Peer v01{"b", "192.0.2.11", 9000};
  ASSERT_EQ(v01.endpoints().size(), 1u);
  EXPECT_EQ(v01.endpoints()[0].to_string(), "tcp://192.0.2.11:9000");
  const Peer listed{"b", "", 0, {Address::parse("unix:///tmp/b.sock")}};
  EXPECT_EQ(listed.endpoints(), listed.addresses);
}

const std::string kPeerB = "peers:\n  - {node_id: node-b, host: 192.0.2.11, port: 9000}\n";

std::string config_error(const std::string& yaml) {
  try {
    parse_node_config(yaml, "x.yaml");
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << yaml;
  return "";
}

TEST(Address, YamlAddressAndAddresses) {
  const NodeConfig c = parse_node_config(
      "local: {node_id: node-a, addresses: ['tcp://0.0.0.0:0', 'unix://@node-a']}\n"
      "peers:\n"
      "  - {node_id: node-b, address: 'unix:///tmp/node-b.sock'}\n"
      "  - {node_id: node-c, host: 192.0.2.12, port: 9000, address: 'unix:///tmp/c.sock'}\n");
  ASSERT_EQ(c.local.addresses.size(), 2u);
  EXPECT_EQ(c.local.addresses[1].to_string(), "unix://@node-a");
  EXPECT_EQ(c.peers[0].endpoints().at(0).to_string(), "unix:///tmp/node-b.sock");
  // host + port beside an address: V0.1's address first.
  ASSERT_EQ(c.peers[1].endpoints().size(), 2u);
  EXPECT_EQ(c.peers[1].endpoints()[0].to_string(), "tcp://192.0.2.12:9000");
}

TEST(Address, YamlErrorsNameTheKeyAndTheAddress) {
  const std::string bad = config_error("local: {node_id: a, address: 'tcp://h'}\n" + kPeerB);
  EXPECT_NE(bad.find("local.address"), std::string::npos) << bad;
  EXPECT_NE(bad.find("'tcp://h'"), std::string::npos) << bad;
  const std::string listed = config_error("local: {node_id: a, host: h, port: 1}\n"
                                          "peers:\n  - {node_id: b, addresses: ['unix:///ok', 'udp://x:1']}\n");
  EXPECT_NE(listed.find("peers[0].addresses[1]"), std::string::npos) << listed;
  EXPECT_NE(config_error("local: {node_id: a}\n" + kPeerB).find("'address'"), std::string::npos);
  EXPECT_NE(config_error("local: {node_id: a, host: h}\n" + kPeerB).find("'port'"), std::string::npos);
  EXPECT_NE(config_error("local: {node_id: a, address: 'unix://@a', addresses: ['unix://@b']}\n" + kPeerB)
                .find("not both"),
            std::string::npos);
  EXPECT_NE(config_error("local: {node_id: a, addresses: []}\n" + kPeerB).find("non-empty list"), std::string::npos);
}

}  // namespace
}  // namespace wcomm
