// Where an entity of the mesh listens: the endpoint rules of a pyzmq mesh (mesh-zmq.md) and
// of the wcomm transport, with their environment overrides.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "wcomm/mesh/communicator.h"

namespace wcomm::mesh {

inline constexpr std::string_view kDefaultIpcPrefix = "/tmp/mstar/";

// The protocol to use: MSTAR_ZMQ_TRANSPORT (IPC or TCP, any case) when set, else `given`.
// InvalidArgumentError naming the variable's value when it is neither.
CommProtocol transport_from_env(CommProtocol given);

// The TCP port of an entity: base for api_server, base+1 conductor, base+2
// api_server_preprocess_worker, base+100+N worker_N (N all digits), else
// base+1000+(sum of the id's UTF-8 bytes mod 1000).
std::uint16_t tcp_port_for(std::string_view entity_id, std::uint16_t base);

// The ZeroMQ endpoint a pyzmq entity binds: ipc://{prefix}/{id}.ipc (the prefix as given, so
// the default holds a double slash), or tcp://{MSTAR_ZMQ_TCP_HOST or 127.0.0.1}:{port from
// MSTAR_ZMQ_TCP_BASE_PORT or 19000}. SHM and RDMA: InvalidArgumentError (pyzmq has neither).
std::string zmq_endpoint(std::string_view entity_id, CommProtocol protocol, std::string_view ipc_prefix);

// The wcomm transport's address of an entity (wcomm/address.h form): IPC the Unix socket
// unix://{prefix}/{id}.wcomm, SHM shared memory set up there (shm://{prefix}/{id}.wcomm); TCP
// tcp://{MSTAR_ZMQ_TCP_HOST}:{port}, the ports counted from WCOMM_MESH_TCP_BASE_PORT (default
// 21000, away from a pyzmq mesh's); RDMA ucx://{MSTAR_ZMQ_TCP_HOST}:{port} (the ucx
// transport: UCX, over RDMA where there is RDMA), the ports as TCP's but counted from
// WCOMM_MESH_RDMA_BASE_PORT (default 23000).
std::string wcomm_endpoint(std::string_view entity_id, CommProtocol protocol, std::string_view ipc_prefix);

// Reads an integer environment variable; `fallback` when unset, InvalidArgumentError naming
// the variable when it is not a whole number in [min, max].
long env_integer(const char* name, long fallback, long min, long max);

}  // namespace wcomm::mesh
