// The simulated cell: an access point and one station radio per --station on one 5 GHz
// channel, and optionally a neighbouring network sharing that channel.
#pragma once

#include <ns3/net-device-container.h>
#include <ns3/node-container.h>
#include <ns3/wifi-net-device.h>

#include "options.h"

namespace wifi_cell {

struct Cell {
  ns3::NodeContainer stations;   // one per --station, in order
  ns3::Ptr<ns3::Node> ap;        // also carries the --ap-host TAP
  std::vector<ns3::Ptr<ns3::WifiNetDevice>> station_radios;
  ns3::Ptr<ns3::WifiNetDevice> ap_radio;
};

Cell build_cell(const Options& options);

}  // namespace wifi_cell
