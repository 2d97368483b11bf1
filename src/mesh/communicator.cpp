// Communicator's shared parts: decoding drains, the registered event, protocol names.
#include "wcomm/mesh/communicator.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

#include <spdlog/spdlog.h>

#include "wcomm/errors.h"

namespace wcomm::mesh {

const char* protocol_name(CommProtocol protocol) {
  switch (protocol) {
    case CommProtocol::kIpc: return "IPC";
    case CommProtocol::kTcp: return "TCP";
    case CommProtocol::kShm: return "SHM";
    case CommProtocol::kRdma: return "RDMA";
  }
  return "?";
}

CommProtocol parse_protocol(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (CommProtocol p : {CommProtocol::kIpc, CommProtocol::kTcp, CommProtocol::kShm, CommProtocol::kRdma})
    if (upper == protocol_name(p)) return p;
  throw InvalidArgumentError("unknown mesh protocol '" + std::string(text) + "' (IPC, TCP, SHM or RDMA)");
}

Communicator::Communicator(std::string my_id, std::shared_ptr<const Codec> codec)
    : my_id_(std::move(my_id)), codec_(codec ? std::move(codec) : std::make_shared<PickleCodec>()) {
  if (my_id_.empty()) throw InvalidArgumentError("a mesh entity needs a non-empty id");
}

std::vector<Value> Communicator::get_all_new_messages(bool blocking, std::optional<double> timeout_s) {
  std::vector<std::string> raw = get_all_new_bytes(blocking, timeout_s);
  std::vector<Value> out;
  out.reserve(raw.size());
  for (const std::string& data : raw) {
    try {
      out.push_back(codec_->decode(data));
    } catch (const SerializationError& e) {
      // One bad message must not take the others of the batch with it: it is logged, dropped.
      spdlog::error("mesh entity '{}': dropped a message of {} bytes that the {} codec cannot decode: {}", my_id_,
                    data.size(), codec_->name(), e.what());
    }
  }
  return out;
}

int Communicator::event_fd() const {
  if (event_fd_ >= 0 && ::fcntl(event_fd_, F_GETFD) < 0 && errno == EBADF)
    throw std::system_error(EBADF, std::generic_category(),
                            "mesh entity '" + my_id_ + "': the event registered for poll (fd " +
                                std::to_string(event_fd_) + ") was closed");
  return event_fd_;
}

void Communicator::drain_event() const {
  if (event_fd_ < 0) return;
  std::uint64_t count;
  while (::read(event_fd_, &count, sizeof count) < 0 && errno == EINTR) {
  }
}

}  // namespace wcomm::mesh
