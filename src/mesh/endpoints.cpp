// The endpoint rules of a pyzmq mesh (mesh-zmq.md) and of the wcomm transport.
#include "wcomm/mesh/endpoints.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "wcomm/errors.h"

namespace wcomm::mesh {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string join_ipc(std::string_view prefix, std::string_view entity_id, std::string_view suffix) {
  // As pyzmq's f"{prefix}/{id}.ipc": the default prefix ends in '/', so the path holds "//".
  return std::string(prefix) + "/" + std::string(entity_id) + std::string(suffix);
}

std::string tcp_host() { return env_or("MSTAR_ZMQ_TCP_HOST", "127.0.0.1"); }

}  // namespace

long env_integer(const char* name, long fallback, long min, long max) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < min || n > max)
    throw InvalidArgumentError(std::string(name) + "='" + v + "' is not a whole number in [" + std::to_string(min) +
                               ", " + std::to_string(max) + "]");
  return n;
}

CommProtocol transport_from_env(CommProtocol given) {
  const char* v = std::getenv("MSTAR_ZMQ_TRANSPORT");
  if (!v || !*v) return given;
  CommProtocol p;
  try {
    p = parse_protocol(v);
  } catch (const InvalidArgumentError&) {
    p = CommProtocol::kShm;  // reported below
  }
  if (p != CommProtocol::kIpc && p != CommProtocol::kTcp)
    throw InvalidArgumentError(std::string("MSTAR_ZMQ_TRANSPORT='") + v + "' (must be IPC or TCP)");
  return p;
}

std::uint16_t tcp_port_for(std::string_view id, std::uint16_t base) {
  long port;
  if (id == "api_server") port = base;
  else if (id == "conductor") port = base + 1;
  else if (id == "api_server_preprocess_worker") port = base + 2;
  else if (id.size() > 7 && id.starts_with("worker_") &&
           id.find_first_not_of("0123456789", 7) == std::string_view::npos)
    port = base + 100 + std::stol(std::string(id.substr(7)));
  else {
    unsigned sum = 0;
    for (char c : id) sum += static_cast<unsigned char>(c);
    port = base + 1000 + sum % 1000;
  }
  if (port > 65535)
    throw InvalidArgumentError("entity '" + std::string(id) + "' maps to TCP port " + std::to_string(port) +
                               " (base " + std::to_string(base) + "), beyond 65535");
  return static_cast<std::uint16_t>(port);
}

std::string zmq_endpoint(std::string_view entity_id, CommProtocol protocol, std::string_view ipc_prefix) {
  switch (protocol) {
    case CommProtocol::kIpc: return "ipc://" + join_ipc(ipc_prefix, entity_id, ".ipc");
    case CommProtocol::kTcp: {
      auto base = static_cast<std::uint16_t>(env_integer("MSTAR_ZMQ_TCP_BASE_PORT", 19000, 1, 65535));
      return "tcp://" + tcp_host() + ":" + std::to_string(tcp_port_for(entity_id, base));
    }
    default:
      throw InvalidArgumentError(std::string("the ZeroMQ communicator has no ") + protocol_name(protocol) +
                                 " transport (as pyzmq's: use IPC or TCP, or the wcomm transport for SHM and RDMA)");
  }
}

std::string wcomm_endpoint(std::string_view entity_id, CommProtocol protocol, std::string_view ipc_prefix) {
  switch (protocol) {
    case CommProtocol::kIpc: return "unix://" + join_ipc(ipc_prefix, entity_id, ".wcomm");
    case CommProtocol::kShm: return "shm://" + join_ipc(ipc_prefix, entity_id, ".wcomm");
    case CommProtocol::kTcp: {
      auto base = static_cast<std::uint16_t>(env_integer("WCOMM_MESH_TCP_BASE_PORT", 21000, 1, 65535));
      return "tcp://" + tcp_host() + ":" + std::to_string(tcp_port_for(entity_id, base));
    }
    case CommProtocol::kRdma: {  // UCX (the ucx transport): RDMA where there is RDMA, else its tcp / shm
      auto base = static_cast<std::uint16_t>(env_integer("WCOMM_MESH_RDMA_BASE_PORT", 23000, 1, 65535));
      return "ucx://" + tcp_host() + ":" + std::to_string(tcp_port_for(entity_id, base));
    }
  }
  return {};
}

}  // namespace wcomm::mesh
