// Opening an existing TAP device that lives in a network namespace.
#pragma once

#include <array>
#include <cstdint>

#include "options.h"

namespace wifi_cell {

using Mac = std::array<uint8_t, 6>;

// Attaches to the TAP (made beforehand, e.g. `ip -n NS tuntap add dev D mode tap`) from inside
// its namespace, then returns to ours; returns its fd. Throws std::runtime_error naming what failed.
int open_tap(const Endpoint& endpoint);

// Gives the TAP its radio's MAC: a station's radio sends only from its own address, so the
// host behind it must use that address for the frames to be carried and the replies to reach it.
void set_tap_mac(int fd, const Endpoint& endpoint, const Mac& mac);

}  // namespace wifi_cell
