// A neighbouring network on the same channel: its own access point and station, and bursty
// downlink traffic between them that takes airtime from the cell and collides with it.
#pragma once

#include <ns3/wifi-helper.h>
#include <ns3/yans-wifi-helper.h>

#include "options.h"

namespace wifi_cell {

void add_neighbour(const Options& options, ns3::WifiHelper& wifi, ns3::YansWifiPhyHelper& phy);

}  // namespace wifi_cell
