#include "cell.h"

#include <cmath>

#include <ns3/boolean.h>
#include <ns3/config.h>
#include <ns3/constant-position-mobility-model.h>
#include <ns3/double.h>
#include <ns3/he-configuration.h>
#include <ns3/qos-utils.h>
#include <ns3/ssid.h>
#include <ns3/string.h>
#include <ns3/wifi-mac-helper.h>
#include <ns3/wifi-mac-queue.h>
#include <ns3/wifi-mac.h>
#include <ns3/yans-wifi-channel.h>
#include <ns3/yans-wifi-helper.h>

#include "neighbour.h"

namespace wifi_cell {
namespace {

using namespace ns3;

WifiStandard standard_of(const Options& o) {
  if (o.standard == "n") return WIFI_STANDARD_80211n;
  if (o.standard == "ac") return WIFI_STANDARD_80211ac;
  return WIFI_STANDARD_80211ax;
}

void place(Ptr<Node> node, double x, double y) {
  auto position = CreateObject<ConstantPositionMobilityModel>();
  position->SetPosition(Vector(x, y, 0.0));
  node->AggregateObject(position);
}

// The queue an untuned access point (and every client) has: --mac-queue packets per access
// category, frames older than --mac-queue-max-delay-ms dropped.
void size_queues(Ptr<WifiNetDevice> radio, const Options& o) {
  for (AcIndex ac : {AC_BE, AC_BK, AC_VI, AC_VO}) {
    Ptr<WifiMacQueue> queue = radio->GetMac()->GetTxopQueue(ac);
    queue->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, o.mac_queue_packets));
    queue->SetMaxDelay(MilliSeconds(o.mac_queue_max_delay_ms));
  }
  // 802.11ax: the short guard interval, as access points use it (ns-3 defaults to 3.2 us).
  if (auto he = radio->GetHeConfiguration()) he->SetGuardInterval(NanoSeconds(800));
}

}  // namespace

Cell build_cell(const Options& o) {
  YansWifiChannelHelper channel_helper;
  channel_helper.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel");
  // Indoor-ish: exponent 3 from 1 m (46.68 dB at 5.15 GHz).
  channel_helper.AddPropagationLoss("ns3::LogDistancePropagationLossModel", "Exponent", DoubleValue(3.0),
                                    "ReferenceLoss", DoubleValue(46.6777));
  if (o.fading_hz > 0) {
    Config::SetDefault("ns3::JakesProcess::DopplerFrequencyHz", DoubleValue(o.fading_hz));
    channel_helper.AddPropagationLoss("ns3::JakesPropagationLossModel");
  }
  Ptr<YansWifiChannel> channel = channel_helper.Create();

  YansWifiPhyHelper phy;
  phy.SetChannel(channel);
  // Channel number 0: the default channel of that width in the 5 GHz band.
  phy.Set("ChannelSettings", StringValue("{0, " + std::to_string(o.width_mhz) + ", BAND_5GHZ, 0}"));

  WifiHelper wifi;
  wifi.SetStandard(standard_of(o));
  if (o.mcs < 0)
    wifi.SetRemoteStationManager("ns3::MinstrelHtWifiManager");
  else
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode", StringValue(data_mode(o)));

  Cell cell;
  cell.stations.Create(o.stations.size());
  cell.ap = CreateObject<Node>();

  WifiMacHelper mac;
  const Ssid ssid("wcomm-cell");
  mac.SetType("ns3::StaWifiMac", "Ssid", SsidValue(ssid));
  NetDeviceContainer station_devices = wifi.Install(phy, mac, cell.stations);
  mac.SetType("ns3::ApWifiMac", "Ssid", SsidValue(ssid));
  cell.ap_radio = DynamicCast<WifiNetDevice>(wifi.Install(phy, mac, cell.ap).Get(0));
  size_queues(cell.ap_radio, o);

  // The access point at the origin, the stations on a circle around it.
  place(cell.ap, 0.0, 0.0);
  for (uint32_t i = 0; i < cell.stations.GetN(); ++i) {
    const double angle = 2.0 * M_PI * i / cell.stations.GetN();
    const double d = distance_of(o, i);
    place(cell.stations.Get(i), d * std::cos(angle), d * std::sin(angle));
    auto radio = DynamicCast<WifiNetDevice>(station_devices.Get(i));
    size_queues(radio, o);
    cell.station_radios.push_back(radio);
  }

  if (o.neighbour_mbps > 0) add_neighbour(o, wifi, phy);
  return cell;
}

}  // namespace wifi_cell
