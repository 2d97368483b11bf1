// The latency-under-load traffic on loopback: the load server's JSON-lines handshake, paced
// streams that deliver what they were asked for, and a malformed request that ends only itself.
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "netbench/load_client.h"
#include "netbench/load_server.h"
#include "netbench/load_socket.h"
#include "process_util.h"

namespace wcomm::bench {
namespace {

using namespace std::chrono_literals;

TEST(BenchLoad, PacedStreamsDeliverTheirTargetInEachDirection) {
  const std::uint16_t port = wcomm::testing::free_tcp_port();
  LoadServer server("127.0.0.1", port);
  for (const char* direction : {"upload", "download", "bidirectional"}) {
    LoadClient client("127.0.0.1", port, direction, 2, 40.0, 0.5, 5000ms);
    client.go();
    const LoadResult result = client.wait();
    const double directions = std::string(direction) == "bidirectional" ? 2.0 : 1.0;
    const double mbps = (static_cast<double>(result.bytes_sent) * 8 / 0.5 +
                         static_cast<double>(result.bytes_received) * 8 / result.elapsed_s) /
                        1e6;
    EXPECT_NEAR(mbps, 80.0 * directions, 0.15 * 80.0 * directions) << direction;
    EXPECT_LT(result.elapsed_s, 3.0) << direction;
    if (std::string(direction) == "upload") {
      EXPECT_EQ(result.bytes_received, 0u);
    }
    if (std::string(direction) == "download") {
      EXPECT_EQ(result.bytes_sent, 0u);
    }
  }
  server.stop();
}

TEST(BenchLoad, MalformedRequestEndsOnlyItsConnection) {
  const std::uint16_t port = wcomm::testing::free_tcp_port();
  LoadServer server("127.0.0.1", port);
  {
    Socket bad = connect_tcp("127.0.0.1", port, 5000ms);
    write_all(bad.fd(), "not json\n");
    EXPECT_THROW(read_line(bad.fd()), std::runtime_error);  // closed without READY
  }
  LoadClient good("127.0.0.1", port, "upload", 1, 10.0, 0.1, 5000ms);
  good.go();
  EXPECT_GT(good.wait().bytes_sent, 0u);
}

}  // namespace
}  // namespace wcomm::bench
