#include "tap.h"

#include <fcntl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <net/if_arp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace wifi_cell {
namespace {

std::runtime_error failure(const Endpoint& e, const std::string& what) {
  return std::runtime_error("TAP " + (e.netns.empty() ? "" : e.netns + ":") + e.device + ": " + what + ": " + std::strerror(errno));
}

// Enters a namespace for the life of the object: a TAP is looked up (TUNSETIFF) in the
// namespace of the thread that opens it, and keeps working wherever its fd is used from.
class InNamespace {
 public:
  explicit InNamespace(const Endpoint& e) {
    if (e.netns.empty()) return;
    home_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home_ < 0) throw failure(e, "open /proc/self/ns/net");
    const int target = open(("/var/run/netns/" + e.netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0) throw failure(e, "no such network namespace (/var/run/netns/" + e.netns + ")");
    const int rc = setns(target, CLONE_NEWNET);
    close(target);
    if (rc != 0) throw failure(e, "setns (needs root)");
  }
  ~InNamespace() {
    if (home_ < 0) return;
    setns(home_, CLONE_NEWNET);
    close(home_);
  }
  InNamespace(const InNamespace&) = delete;
  InNamespace& operator=(const InNamespace&) = delete;

 private:
  int home_ = -1;
};

}  // namespace

int open_tap(const Endpoint& e) {
  InNamespace in(e);
  // TUNSETIFF would make a new TAP that nothing is routed through: the script makes them first.
  if (if_nametoindex(e.device.c_str()) == 0) throw failure(e, "no such device in that namespace");
  const int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) throw failure(e, "open /dev/net/tun (a kernel without TUN?)");
  ifreq ifr{};
  // No packet-info header: FdNetDevice's default (DIX) encapsulation reads plain Ethernet frames.
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, e.device.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    const auto error = failure(e, "TUNSETIFF (is it a TAP made with `ip tuntap add ... mode tap`, not in use?)");
    close(fd);
    throw error;
  }
  return fd;
}

void set_tap_mac(int fd, const Endpoint& e, const Mac& mac) {
  ifreq ifr{};
  ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  std::memcpy(ifr.ifr_hwaddr.sa_data, mac.data(), mac.size());
  if (ioctl(fd, SIOCSIFHWADDR, &ifr) != 0) throw failure(e, "SIOCSIFHWADDR");
}

}  // namespace wifi_cell
