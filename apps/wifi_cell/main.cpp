// wcomm-wifi-cell: see docs/wifi.md. Exit status: 0 done, 1 could not set up the cell,
// 2 bad arguments, 3 the simulator fell behind real time (mean lag above --lag-limit-ms).
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <ns3/fd-net-device-helper.h>
#include <ns3/global-value.h>
#include <ns3/mac48-address.h>
#include <ns3/rng-seed-manager.h>
#include <ns3/simulator.h>
#include <ns3/sta-wifi-mac.h>
#include <ns3/string.h>

#include "bridge.h"
#include "cell.h"
#include "lag.h"
#include "options.h"
#include "output.h"
#include "tap.h"

namespace {

using namespace ns3;
using namespace wifi_cell;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Stops the simulator once a signal came; polled, as a handler may not call into ns-3.
void watch_signals() {
  if (g_stop)
    Simulator::Stop();
  else
    Simulator::Schedule(MilliSeconds(20), &watch_signals);
}

std::string mac_text(const Address& address) {
  std::ostringstream out;
  out << Mac48Address::ConvertFrom(address);
  return out.str();
}

Mac mac_bytes(const Address& address) {
  Mac mac{};
  Mac48Address::ConvertFrom(address).CopyTo(mac.data());
  return mac;
}

std::string endpoint_text(const Endpoint& e) { return (e.netns.empty() ? "" : e.netns + ":") + e.device; }

// Prints one line when every station is associated, and any association change after that.
class AssociationWatch {
 public:
  explicit AssociationWatch(const Cell& cell) : associated_(cell.station_radios.size(), false) {
    for (size_t i = 0; i < cell.station_radios.size(); ++i) {
      auto mac = DynamicCast<StaWifiMac>(cell.station_radios[i]->GetMac());
      mac->TraceConnectWithoutContext("Assoc", Callback<void, Mac48Address>([this, i](Mac48Address) { changed(i, true); }));
      mac->TraceConnectWithoutContext("DeAssoc", Callback<void, Mac48Address>([this, i](Mac48Address) { changed(i, false); }));
    }
  }

 private:
  void changed(size_t station, bool up) {
    associated_[station] = up;
    size_t count = 0;
    for (bool a : associated_) count += a;
    if (count == associated_.size() && !announced_) {
      announced_ = true;
      emit(format("{\"event\":\"associated\",\"t_s\":%.3f,\"stations\":%zu}", Simulator::Now().GetSeconds(), count));
    } else if (announced_) {
      emit(format("{\"event\":\"%s\",\"t_s\":%.3f,\"station\":%zu}", up ? "reassociated" : "disassociated",
                  Simulator::Now().GetSeconds(), station));
    }
  }

  std::vector<bool> associated_;
  bool announced_ = false;
};

void print_cell(const Options& o, const Cell& cell) {
  std::string line = format("{\"event\":\"cell\",\"standard\":\"802.11%s\",\"width_mhz\":%d,\"rate\":\"%s\","
              "\"fading_hz\":%g,\"wired_delay_ms\":%g,\"neighbour_mbps\":%g,\"mac_queue_packets\":%d,\"stations\":[",
              o.standard.c_str(), o.width_mhz, o.mcs < 0 ? "minstrel" : data_mode(o).c_str(),
              o.fading_hz, o.wired_delay_ms, o.neighbour_mbps, o.mac_queue_packets);
  for (size_t i = 0; i < o.stations.size(); ++i)
    line += format("%s{\"tap\":\"%s\",\"mac\":\"%s\",\"distance_m\":%g}", i ? "," : "", endpoint_text(o.stations[i]).c_str(),
                mac_text(cell.station_radios[i]->GetAddress()).c_str(), distance_of(o, i));
  line += format("],\"ap_host\":\"%s\"}", o.has_ap_host ? endpoint_text(o.ap_host).c_str() : "");
  emit(std::move(line));
}

Ptr<FdNetDevice> attach_tap(Ptr<Node> node, int fd) {
  FdNetDeviceHelper helper;
  auto tap = DynamicCast<FdNetDevice>(helper.Install(node).Get(0));
  tap->SetFileDescriptor(fd);
  return tap;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    if (!parse_options(argc, argv, o)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm-wifi-cell: %s\n(run with --help for the options)\n", e.what());
    return 2;
  }

  std::vector<int> station_fds;
  int ap_host_fd = -1;
  try {
    for (const auto& s : o.stations) station_fds.push_back(open_tap(s));
    if (o.has_ap_host) ap_host_fd = open_tap(o.ap_host);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm-wifi-cell: %s\n", e.what());
    return 1;
  }

  GlobalValue::Bind("SimulatorImplementationType", StringValue("ns3::RealtimeSimulatorImpl"));
  RngSeedManager::SetRun(o.seed);
  Cell cell = build_cell(o);

  FrameCounters counters;
  try {
    for (size_t i = 0; i < o.stations.size(); ++i) {
      set_tap_mac(station_fds[i], o.stations[i], mac_bytes(cell.station_radios[i]->GetAddress()));
      bridge_station(attach_tap(cell.stations.Get(i), station_fds[i]), cell.station_radios[i], counters);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm-wifi-cell: %s\n", e.what());
    return 1;
  }
  if (o.has_ap_host) bridge_ap_host(attach_tap(cell.ap, ap_host_fd), cell.ap_radio, MilliSeconds(o.wired_delay_ms), counters);
  print_cell(o, cell);

  AssociationWatch association(cell);
  LagMonitor lag(o.lag_probe_ms, o.report_interval_s, o.lag_limit_ms);
  lag.start();
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  watch_signals();
  if (o.duration_s > 0) Simulator::Stop(Seconds(o.duration_s));

  Simulator::Run();
  std::string summary = lag.summary_json();
  summary.pop_back();  // the closing brace: the frame counters go in too
  emit(format("%s,\"frames_to_air\":%llu,\"frames_from_air\":%llu,\"frames_refused\":%llu,\"frames_foreign_source\":%llu}",
              summary.c_str(), static_cast<unsigned long long>(counters.to_air),
              static_cast<unsigned long long>(counters.from_air), static_cast<unsigned long long>(counters.refused),
              static_cast<unsigned long long>(counters.foreign_source)));
  finish_output();
  const bool valid = lag.within_limit();
  Simulator::Destroy();
  if (!valid) {
    std::fprintf(stderr, "wcomm-wifi-cell: lag too high: the simulator's clock fell behind the wall clock by %.3f ms on average (limit %.3f ms): figures taken over this cell are not valid\n",
                 lag.total().mean_ms(), o.lag_limit_ms);
    return 3;
  }
  return 0;
}
