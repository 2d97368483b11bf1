// Setting up an shm connection over its Unix socket: the dialer creates the shared memory
// (a memfd) and four eventfds and hands them over with SCM_RIGHTS; each side then checks
// whether it may read the other's memory directly (cross-memory attach). Nothing is left in
// the file system: the memfd is closed once mapped, the socket is abstract or unlinked.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "transport/shm/shm_layout.h"

namespace wcomm::transport::shm {

// A descriptor closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The mapped shared memory; unmapped when the last owner lets go.
class Mapping {
 public:
  Mapping(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  SharedHeader& header() const { return *static_cast<SharedHeader*>(base_); }
  std::uint8_t* ring_data(int direction) const {
    return static_cast<std::uint8_t*>(base_) + kHeaderBytes + header().ring_bytes * std::size_t(direction);
  }

 private:
  void* base_;
  std::size_t bytes_;
};

// Everything one side of a set-up connection holds.
struct Endpoint {
  UniqueFd socket;                  // the Unix socket: EOF once the peer goes, even if killed
  std::shared_ptr<Mapping> mapping;
  int side = 0;                     // 0: dialer (produces ring 0), 1: acceptor (produces ring 1)
  UniqueFd out_data, out_space;     // rung by us / waited on by us, for the ring we produce
  UniqueFd in_data, in_space;       // waited on by us / rung by us, for the ring we consume
  pid_t peer_pid = 0;
  std::string cma_refused;          // why we may not read the peer's memory ("" if we may)
  std::unique_ptr<std::uint64_t> probe;  // a word the peer reads to test cross-memory attach
};

// What goes over the socket at set-up (with the descriptors, dialer to acceptor).
struct SetupMessage {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t status;  // reply: 0 ok
  std::uint64_t ring_bytes;
  std::uint64_t probe_address;
  std::uint64_t probe_value;
};

constexpr std::size_t kDefaultRingBytes = 1u << 20;  // per direction (large payloads bypass it)

// The error of a set-up that could not create its memory or descriptors: an errno value in a
// category whose message names the limit that was hit (RLIMIT_FSIZE, RLIMIT_NOFILE, a full
// shared-memory file system), so that the user's ConnectionFailedError says it.
std::error_code resource_error(int err);

// Dialer, on a connected socket: creates the memory and eventfds and sends them. Null on
// failure, with error (a sentence naming the limit) and code (resource_error, or another).
std::unique_ptr<Endpoint> start_dialer(int socket_fd, std::size_t ring_bytes, std::string& error,
                                       std::error_code& code);
// Dialer, once the acceptor's reply has arrived (readable socket): reads it, tests reading
// the acceptor's memory. False with error set if the reply is missing or malformed.
bool finish_dialer(Endpoint& endpoint, int socket_fd, std::string& error);
// Acceptor, once the dialer's message has arrived (readable socket): takes the descriptors,
// maps the memory, tests reading the dialer's memory, replies. Null with error set on failure.
std::unique_ptr<Endpoint> accept_setup(int socket_fd, std::string& error);

}  // namespace wcomm::transport::shm
