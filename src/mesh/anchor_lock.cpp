// AnchorLock: an exclusive, non-blocking flock on a file next to the conductor's endpoint.
#include "wcomm/mesh/anchor_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "wcomm/errors.h"

namespace wcomm::mesh {

std::string anchor_lock_path(const std::string& endpoint) {
  for (const char* scheme : {"ipc://", "unix://", "shm://"})
    if (endpoint.starts_with(scheme)) return endpoint.substr(std::strlen(scheme)) + ".lock";
  std::string key = endpoint;
  for (char& c : key)
    if (c == '/' || c == ':') c = '_';
  return "/tmp/mstar-anchor-" + key + ".lock";
}

AnchorLock::AnchorLock(const std::string& endpoint) : path_(anchor_lock_path(endpoint)) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ignored);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InvalidArgumentError("cannot open the deployment anchor lock " + path_ + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK)
      throw InvalidArgumentError("deployment anchor for " + endpoint + " is held by pid " + holder + " (lock file " +
                                 path_ + "): another conductor of this deployment is running");
    throw InvalidArgumentError("cannot lock " + path_ + ": " + std::strerror(err));
  }
  // The holder's pid, for the next conductor's error message.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the pid; a rival's message then says "unknown".
  }
}

AnchorLock::~AnchorLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock; the file stays (unlinking would race a new holder)
}

}  // namespace wcomm::mesh
