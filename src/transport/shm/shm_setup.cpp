// shm set-up: memfd, eventfds, SCM_RIGHTS, and the cross-memory attach probe.
#include "transport/shm/shm_setup.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

namespace wcomm::transport::shm {
namespace {

constexpr int kFdCount = 5;  // memfd, then eventfds: ring 0 data, ring 0 space, ring 1 data, ring 1 space

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Maps size bytes of fd; pre-faults them so that no message pays page faults later.
std::shared_ptr<Mapping> map_shared(int fd, std::size_t bytes, std::string& error) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    error = errno_text("mmap of the shared rings");
    return nullptr;
  }
  if (::madvise(base, bytes, MADV_POPULATE_WRITE) != 0) {
    // An older kernel: touch each page instead (the dialer's fallocate made sure the memory
    // exists, so this cannot end in SIGBUS).
    for (std::size_t i = 0; i < bytes; i += 4096) static_cast<volatile std::uint8_t*>(base)[i] = 0;
  }
  return std::make_shared<Mapping>(base, bytes);
}

std::size_t total_bytes(std::size_t ring_bytes) { return kHeaderBytes + 2 * ring_bytes; }

// Whether we may read word at address in process pid (and find value there). WCOMM_SHM_CMA=0
// turns cross-memory attach off, for a comparison or a kernel that misbehaves.
std::string probe_peer(pid_t pid, std::uint64_t address, std::uint64_t value) {
  if (const char* env = std::getenv("WCOMM_SHM_CMA"); env && std::string(env) == "0") return "WCOMM_SHM_CMA=0";
  std::uint64_t got = 0;
  iovec local{&got, sizeof got};
  iovec remote{reinterpret_cast<void*>(address), sizeof got};
  const ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n != sizeof got) return errno_text("process_vm_readv");
  if (got != value) return "process_vm_readv read the wrong word";
  return "";
}

pid_t peer_pid_of(int socket_fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  return ::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
}

std::unique_ptr<std::uint64_t> new_probe() {
  std::random_device rd;
  return std::make_unique<std::uint64_t>((std::uint64_t(rd()) << 32) | rd() | 1);
}

bool send_message(int socket_fd, const SetupMessage& message, const int* fds, int nfds, std::string& error) {
  iovec iov{const_cast<SetupMessage*>(&message), sizeof message};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdCount)] = {};
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  // A fresh socket's buffer takes these few bytes at once.
  const ssize_t n = ::sendmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(sizeof message)) return true;
  error = n < 0 ? errno_text("sending the shm set-up") : "sending the shm set-up: short write";
  return false;
}

// Receives one set-up message and up to kFdCount descriptors (owned by fds on return).
bool receive_message(int socket_fd, SetupMessage& message, UniqueFd (&fds)[kFdCount], int& nfds, std::string& error) {
  iovec iov{&message, sizeof message};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdCount)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int count = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (nfds < kFdCount) fds[nfds++] = UniqueFd(fd);
      else ::close(fd);  // more than we asked for: not ours to keep
    }
  }
  if (n == 0) error = "the peer closed the socket during the shm set-up";
  else if (n < 0) error = errno_text("reading the shm set-up");
  else if (n != static_cast<ssize_t>(sizeof message) || (msg.msg_flags & MSG_CTRUNC)) error = "a truncated shm set-up message";
  else if (message.magic != kMagic || message.version != kVersion) error = "not a wcomm shm peer (bad magic or version)";
  else return true;
  return false;
}

// What each errno of memfd_create, ftruncate, fallocate and eventfd means here.
const char* limit_named(int err) {
  switch (err) {
    case EFBIG: return "the shared rings exceed the file size limit (RLIMIT_FSIZE, ulimit -f)";
    case EMFILE: return "the process's descriptor limit is reached (RLIMIT_NOFILE, ulimit -n)";
    case ENFILE: return "the system's descriptor limit is reached (fs.file-max)";
    case ENOSPC: return "shared memory is exhausted (/dev/shm or the memfd's tmpfs is full)";
    case ENOMEM: return "out of memory for the shared rings (a memory cgroup or overcommit limit)";
    default: return nullptr;
  }
}

class ResourceCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "wcomm.shm"; }
  std::string message(int err) const override {
    const char* limit = limit_named(err);
    return std::string("could not create the shm rings: ") + (limit ? limit : std::strerror(err));
  }
};

// The sentence for a failed step, naming the limit when we know it.
std::string failure(const char* what, int err) {
  const char* limit = limit_named(err);
  return std::string(what) + ": " + std::strerror(err) + (limit ? std::string(" (") + limit + ")" : "");
}

}  // namespace

std::error_code resource_error(int err) {
  static const ResourceCategory category;
  return {err, category};
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}
UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}
Mapping::~Mapping() { ::munmap(base_, bytes_); }

std::unique_ptr<Endpoint> start_dialer(int socket_fd, std::size_t ring_bytes, std::string& error,
                                       std::error_code& code) {
  const auto fail = [&](const char* what, int err) {
    error = failure(what, err);
    code = resource_error(err);
    return nullptr;
  };
  const std::size_t bytes = total_bytes(ring_bytes);
  // Growing a file past RLIMIT_FSIZE raises SIGXFSZ, which ends the process unless handled:
  // look first, and fail as the kernel would, without the signal.
  if (rlimit limit{}; ::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
                      limit.rlim_cur < bytes)
    return fail(("sizing the shared rings to " + std::to_string(bytes) + " bytes").c_str(), EFBIG);
  UniqueFd memfd(::memfd_create("wcomm-shm", MFD_CLOEXEC));
  if (!memfd) return fail("memfd_create", errno);
  // fallocate, not only ftruncate: a full tmpfs fails here, with ENOSPC, not with SIGBUS later.
  int rc = ::ftruncate(memfd.get(), static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (rc == 0) rc = ::posix_fallocate(memfd.get(), 0, static_cast<off_t>(bytes));  // returns the error
  if (rc != 0) return fail(("allocating " + std::to_string(bytes) + " bytes of shared rings").c_str(), rc);
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->mapping = map_shared(memfd.get(), bytes, error);
  if (!endpoint->mapping) {
    code = resource_error(ENOMEM);
    return nullptr;
  }
  SharedHeader* header = new (&endpoint->mapping->header()) SharedHeader{};
  header->magic = kMagic;
  header->version = kVersion;
  header->ring_bytes = ring_bytes;
  UniqueFd efd[4];
  for (auto& e : efd) {
    e = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!e) return fail("eventfd", errno);
  }
  endpoint->probe = new_probe();
  const SetupMessage message{kMagic, kVersion, 0, ring_bytes, reinterpret_cast<std::uint64_t>(endpoint->probe.get()),
                             *endpoint->probe};
  const int fds[kFdCount] = {memfd.get(), efd[0].get(), efd[1].get(), efd[2].get(), efd[3].get()};
  if (!send_message(socket_fd, message, fds, kFdCount, error)) {
    code = std::make_error_code(std::errc::connection_reset);
    return nullptr;
  }
  endpoint->side = 0;
  endpoint->out_data = std::move(efd[0]);
  endpoint->out_space = std::move(efd[1]);
  endpoint->in_data = std::move(efd[2]);
  endpoint->in_space = std::move(efd[3]);
  return endpoint;  // the memfd closes here: the mappings keep the memory
}

bool finish_dialer(Endpoint& endpoint, int socket_fd, std::string& error) {
  SetupMessage reply{};
  UniqueFd none[kFdCount];
  int nfds = 0;
  if (!receive_message(socket_fd, reply, none, nfds, error)) return false;
  if (reply.status != 0) {
    error = "the peer refused the shm set-up";
    return false;
  }
  endpoint.peer_pid = peer_pid_of(socket_fd);
  endpoint.cma_refused = probe_peer(endpoint.peer_pid, reply.probe_address, reply.probe_value);
  endpoint.mapping->header().ring[1].consumer_reads_producer.store(endpoint.cma_refused.empty() ? 1 : 0);
  return true;
}

std::unique_ptr<Endpoint> accept_setup(int socket_fd, std::string& error) {
  SetupMessage message{};
  UniqueFd fds[kFdCount];
  int nfds = 0;
  if (!receive_message(socket_fd, message, fds, nfds, error)) return nullptr;
  if (nfds != kFdCount) {
    error = "the shm set-up carried " + std::to_string(nfds) + " descriptors, not " + std::to_string(kFdCount);
    return nullptr;
  }
  const std::uint64_t ring = message.ring_bytes;
  struct stat info {};
  if (ring < 4096 || ring > (1ull << 30) || (ring & (ring - 1)) != 0 || ::fstat(fds[0].get(), &info) != 0 ||
      static_cast<std::uint64_t>(info.st_size) != total_bytes(ring)) {
    error = "the shm set-up's memory is not the size it announces";
    return nullptr;
  }
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->mapping = map_shared(fds[0].get(), total_bytes(ring), error);
  if (!endpoint->mapping) return nullptr;
  const SharedHeader& header = endpoint->mapping->header();
  if (header.magic != kMagic || header.version != kVersion || header.ring_bytes != ring) {
    error = "the shm set-up's memory does not hold wcomm rings";
    return nullptr;
  }
  endpoint->side = 1;
  endpoint->in_data = std::move(fds[1]);
  endpoint->in_space = std::move(fds[2]);
  endpoint->out_data = std::move(fds[3]);
  endpoint->out_space = std::move(fds[4]);
  endpoint->peer_pid = peer_pid_of(socket_fd);
  endpoint->cma_refused = probe_peer(endpoint->peer_pid, message.probe_address, message.probe_value);
  endpoint->mapping->header().ring[0].consumer_reads_producer.store(endpoint->cma_refused.empty() ? 1 : 0);
  endpoint->probe = new_probe();
  const SetupMessage reply{kMagic, kVersion, 0, ring, reinterpret_cast<std::uint64_t>(endpoint->probe.get()),
                           *endpoint->probe};
  if (!send_message(socket_fd, reply, nullptr, 0, error)) return nullptr;
  return endpoint;
}

}  // namespace wcomm::transport::shm
