// The stand-in for the ZeroMQ communicator in a build without it (WCOMM_WITH_ZMQ=OFF, or
// cppzmq-dev missing): making one fails, saying how to get it; the mesh runs over wcomm.
#include "wcomm/errors.h"
#include "wcomm/mesh/zmq_communicator.h"

namespace wcomm::mesh {

struct ZmqCommunicator::Impl {};

ZmqCommunicator::ZmqCommunicator(std::string my_id, std::vector<std::string>, ZmqOptions options)
    : Communicator(std::move(my_id), std::move(options.codec)) {
  throw InvalidArgumentError(
      "the ZeroMQ mesh communicator: this build of wcomm has no ZeroMQ (configured with WCOMM_WITH_ZMQ=OFF or "
      "without cppzmq): install cppzmq-dev and configure with -DWCOMM_WITH_ZMQ=ON, or use the wcomm backend");
}
ZmqCommunicator::~ZmqCommunicator() = default;
void ZmqCommunicator::send_bytes(std::string_view, std::string_view) {}
bool ZmqCommunicator::try_send_bytes(std::string_view, std::string_view) { return false; }
Communicator::WaitResult ZmqCommunicator::wait(int, const std::vector<std::string>&) { return {}; }
std::vector<std::string> ZmqCommunicator::take_all_bytes() { return {}; }
std::string ZmqCommunicator::endpoint() const { return {}; }
CommProtocol ZmqCommunicator::protocol() const { return {}; }
int ZmqCommunicator::sndhwm() const { return 0; }

}  // namespace wcomm::mesh
