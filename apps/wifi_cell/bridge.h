// Carrying Ethernet frames between a host's TAP (an FdNetDevice) and a simulated radio. No
// ns-3 IP stack: frames pass as they are, both ways, in promiscuous mode.
#pragma once

#include <cstdint>

#include <ns3/fd-net-device.h>
#include <ns3/nstime.h>
#include <ns3/wifi-net-device.h>

namespace wifi_cell {

struct FrameCounters {
  uint64_t to_air = 0;      // frames from TAPs handed to a radio
  uint64_t from_air = 0;    // frames from radios written to a TAP
  uint64_t refused = 0;     // a radio or TAP refused the frame (not associated, write failed)
  uint64_t foreign_source = 0;  // a station host sent from a MAC other than its radio's
};

// A station's host: its TAP has the radio's MAC (a station sends only from its own address).
void bridge_station(ns3::Ptr<ns3::FdNetDevice> tap, ns3::Ptr<ns3::WifiNetDevice> radio, FrameCounters& counters);

// The host wired behind the access point, `delay` away each way; the access point forwards
// frames from any source address, so this TAP keeps its own MAC.
void bridge_ap_host(ns3::Ptr<ns3::FdNetDevice> tap, ns3::Ptr<ns3::WifiNetDevice> ap, ns3::Time delay,
                    FrameCounters& counters);

}  // namespace wifi_cell
