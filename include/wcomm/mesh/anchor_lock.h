// The deployment anchor lock: the conductor holds an exclusive flock on a file next to its
// endpoint, so a second conductor of the same deployment fails at once, naming the holder.
#pragma once

#include <string>

namespace wcomm::mesh {

// The lock file of an endpoint: {path}.lock for ipc://, unix:// and shm:// endpoints, else
// /tmp/mstar-anchor-{endpoint with / and : made _}.lock (keyed by the TCP endpoint).
std::string anchor_lock_path(const std::string& endpoint);

// Holds the lock for its lifetime. The kernel drops a flock when its holder exits or
// crashes, so a SIGKILLed conductor never leaves its deployment locked.
class AnchorLock {
 public:
  // Takes the lock or throws InvalidArgumentError: "deployment anchor ... is held by pid N
  // (lock file ...)"; the pid is what the holder wrote into the file.
  explicit AnchorLock(const std::string& endpoint);
  ~AnchorLock();
  AnchorLock(const AnchorLock&) = delete;
  AnchorLock& operator=(const AnchorLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace wcomm::mesh
