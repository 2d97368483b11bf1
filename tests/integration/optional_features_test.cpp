// A build without an optional feature (WCOMM_WITH_TLS / _UCX =OFF, docs/cpp-api.md "Optional
// features"): using it fails at once, naming the CMake option and the Debian package. These
// run in such a build (scripts/test.sh's minimal phase) and skip in a full one. (zstd's:
// CommCompression.WithoutZstd*; ZeroMQ's: tests/mesh/without_zmq_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "build_features.h"
#include "free_port.h"
#include "wcomm/comm.h"

namespace {

using namespace wcomm;

CommSpec spec_without_peers(CommConfig config) {
  CommSpec spec;
  spec.local = {"node-a", "127.0.0.1", 0};
  spec.comm = std::move(config);
  return spec;
}

TEST(OptionalFeatures, WithoutTlsATlsConfigFailsAtCreateSayingHowToGetIt) {
  if (wcomm::testing::kHaveTls) GTEST_SKIP() << "this build has TLS (WCOMM_WITH_TLS=ON)";
  CommConfig config;
  config.tls = {"node.crt", "node.key", "ca.crt"};  // (never read: there is no TLS to read them)
  try {
    (void)Comm::create(spec_without_peers(config));
    FAIL() << "a TLS config was accepted by a build without TLS";
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("WCOMM_WITH_TLS"), std::string::npos) << message;
    EXPECT_NE(message.find("libssl-dev"), std::string::npos) << message;
  }
}

TEST(OptionalFeatures, WithoutUcxAUcxAddressFailsSayingHowToGetIt) {
  if (wcomm::testing::kHaveUcx) GTEST_SKIP() << "this build has UCX (WCOMM_WITH_UCX=ON)";
  CommSpec spec = spec_without_peers({});
  spec.local.addresses = {Address::parse("ucx://127.0.0.1:" + std::to_string(wcomm::testing::ReservedPort().port()))};
  try {
    (void)Comm::create(spec);
    FAIL() << "a ucx:// address was accepted by a build without UCX";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("WCOMM_WITH_UCX"), std::string::npos) << message;
    EXPECT_NE(message.find("libucx-dev"), std::string::npos) << message;
  }
}

}  // namespace
