// The Connection over shared-memory rings (see shm_layout.h): bytes are copied into the ring
// and out again, except large buffers, which the reader copies straight out of the writer's
// memory with cross-memory attach (one copy; the write completes once they are read).
#pragma once

#include <memory>
#include <string>

#include <asio.hpp>

#include "transport/shm/shm_setup.h"
#include "transport/transport.h"

namespace wcomm::transport::shm {

// Buffers at least this long go by cross-memory attach when the reader may use it.
constexpr std::size_t kRemoteMinBytes = 64u << 10;
// A read of at least this many bytes of one remote record is split between two threads.
constexpr std::size_t kSplitMinBytes = 8u << 20;

std::unique_ptr<Connection> make_connection(asio::any_io_executor executor, std::unique_ptr<Endpoint> endpoint,
                                            std::string description);

}  // namespace wcomm::transport::shm
