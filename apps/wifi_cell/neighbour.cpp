#include "neighbour.h"

#include <ns3/constant-position-mobility-model.h>
#include <ns3/data-rate.h>
#include <ns3/node-container.h>
#include <ns3/on-off-helper.h>
#include <ns3/packet-socket-address.h>
#include <ns3/packet-socket-helper.h>
#include <ns3/ssid.h>
#include <ns3/string.h>
#include <ns3/wifi-mac-helper.h>

namespace wifi_cell {

using namespace ns3;

void add_neighbour(const Options& o, WifiHelper& wifi, YansWifiPhyHelper& phy) {
  NodeContainer nodes;
  nodes.Create(2);  // 0: its access point, 1: its station
  WifiMacHelper mac;
  const Ssid ssid("neighbour");
  mac.SetType("ns3::ApWifiMac", "Ssid", SsidValue(ssid));
  NetDeviceContainer ap = wifi.Install(phy, mac, nodes.Get(0));
  mac.SetType("ns3::StaWifiMac", "Ssid", SsidValue(ssid));
  NetDeviceContainer sta = wifi.Install(phy, mac, nodes.Get(1));

  const double x = o.neighbour_distance_m;
  for (uint32_t i = 0; i < 2; ++i) {
    auto position = CreateObject<ConstantPositionMobilityModel>();
    position->SetPosition(Vector(x, i == 0 ? 0.0 : 3.0, 0.0));
    nodes.Get(i)->AggregateObject(position);
  }

  // Raw frames (no IP stack): a packet socket on the access point to its station's MAC.
  PacketSocketHelper().Install(nodes);
  PacketSocketAddress to;
  to.SetSingleDevice(ap.Get(0)->GetIfIndex());
  to.SetPhysicalAddress(sta.Get(0)->GetAddress());
  to.SetProtocol(0x0800);
  // Bursts at twice the mean rate, on and off for exponential times of mean 50 ms: the mean
  // is --neighbour-mbps, the bursts are what hurts latency.
  OnOffHelper onoff("ns3::PacketSocketFactory", Address(to));
  onoff.SetConstantRate(DataRate(static_cast<uint64_t>(2e6 * o.neighbour_mbps)), 1400);
  onoff.SetAttribute("OnTime", StringValue("ns3::ExponentialRandomVariable[Mean=0.05]"));
  onoff.SetAttribute("OffTime", StringValue("ns3::ExponentialRandomVariable[Mean=0.05]"));
  ApplicationContainer app = onoff.Install(nodes.Get(0));
  app.Start(Seconds(1.0));  // after its station has associated
}

}  // namespace wifi_cell
