// A build without ZeroMQ (WCOMM_WITH_ZMQ=OFF): the ZeroMQ communicator cannot be made, and
// says how to get it; the mesh over wcomm is still there. (Built only in such a build: the
// mesh suite beside it needs ZeroMQ throughout.)
#include <gtest/gtest.h>

#include <string>

#include "wcomm/errors.h"
#include "wcomm/mesh/zmq_communicator.h"

TEST(MeshWithoutZmq, TheZmqCommunicatorFailsSayingHowToGetIt) {
  try {
    wcomm::mesh::ZmqCommunicator communicator("entity-a", {"entity-b"});
    FAIL() << "a ZeroMQ communicator was made by a build without ZeroMQ";
  } catch (const wcomm::InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("WCOMM_WITH_ZMQ"), std::string::npos) << message;
    EXPECT_NE(message.find("cppzmq-dev"), std::string::npos) << message;
  }
}
