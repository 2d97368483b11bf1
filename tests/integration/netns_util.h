// Two network namespaces joined by a veth pair (192.0.2.1 in `a` on wcb-a, 192.0.2.2 in `b`
// on wcb-b), optionally shaped with a tc qdisc on both ends; deleted, with everything in
// them, on destruction (also when a test fails). Needs root and `ip netns`.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace wcomm::testing {

inline int sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

struct Namespaces {
  explicit Namespaces(const std::string& prefix)
      : a(prefix + "-a-" + std::to_string(getpid())), b(prefix + "-b-" + std::to_string(getpid())) {}
  ~Namespaces() {
    if (!created) return;
    sh("ip netns del " + a);
    sh("ip netns del " + b);
  }
  Namespaces(const Namespaces&) = delete;
  Namespaces& operator=(const Namespaces&) = delete;

  // qdisc: e.g. "tbf rate 100mbit burst 32kbit latency 50ms", or "" for none.
  bool create(std::string& why, const std::string& qdisc = "") {
    if (sh("ip netns add " + a) != 0) {
      why = "ip netns add failed";
      return false;
    }
    created = true;
    std::vector<std::string> steps = {
        "ip netns add " + b,
        "ip link add wcb-a netns " + a + " type veth peer name wcb-b netns " + b,
        "ip -n " + a + " addr add 192.0.2.1/24 dev wcb-a",
        "ip -n " + b + " addr add 192.0.2.2/24 dev wcb-b",
        "ip -n " + a + " link set lo up",
        "ip -n " + b + " link set lo up",
        "ip -n " + a + " link set wcb-a up",
        "ip -n " + b + " link set wcb-b up",
    };
    if (!qdisc.empty()) {
      steps.push_back("ip netns exec " + a + " tc qdisc add dev wcb-a root " + qdisc);
      steps.push_back("ip netns exec " + b + " tc qdisc add dev wcb-b root " + qdisc);
    }
    for (const auto& step : steps)
      if (sh(step) != 0) {
        why = "failed: " + step;
        return false;
      }
    return true;
  }
  // The link between them, as a Wi-Fi link that drops out and comes back.
  bool set_link(bool up) { return sh("ip -n " + a + " link set wcb-a " + (up ? "up" : "down")) == 0; }

  std::string a, b;
  bool created = false;
};

}  // namespace wcomm::testing
