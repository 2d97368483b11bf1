#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <stdexcept>

namespace wifi_cell {
namespace {

Endpoint parse_endpoint(const std::string& text, const std::string& what) {
  const auto colon = text.find(':');
  Endpoint e;
  if (colon == std::string::npos) {
    e.device = text;
  } else {
    e.netns = text.substr(0, colon);
    e.device = text.substr(colon + 1);
  }
  // IFNAMSIZ is 16 with the terminating zero.
  if (e.device.empty() || e.device.size() > 15)
    throw std::invalid_argument(what + " '" + text + "': expected [NETNS:]TAPDEV with a device name of 1-15 characters");
  return e;
}

// The highest MCS a single spatial stream has per standard; VHT MCS 9 does not exist at 20 MHz.
void check_rate(const Options& o) {
  if (o.mcs < 0) return;
  const int top = o.standard == "n" ? 7 : o.standard == "ac" ? 9 : 11;
  if (o.mcs > top)
    throw std::invalid_argument("--mcs " + std::to_string(o.mcs) + ": 802.11" + o.standard + " with one spatial stream goes up to MCS " + std::to_string(top));
  if (o.standard == "ac" && o.width_mhz == 20 && o.mcs == 9)
    throw std::invalid_argument("--mcs 9: 802.11ac has no MCS 9 at 20 MHz with one spatial stream");
}

}  // namespace

bool parse_options(int argc, char** argv, Options& o) {
  CLI::App app{
      "A simulated 802.11 cell (ns-3, real time) between TAP devices: one station per --station, "
      "an access point, and optionally a host wired behind it (--ap-host). Prints JSON lines on "
      "stdout: one when every station is associated, the real-time lag every --report-interval "
      "and at exit. Exits 3 when the mean lag passed --lag-limit-ms (the run is not valid).",
      "wcomm-wifi-cell"};
  std::vector<std::string> stations;
  std::string ap_host, mcs = "7";
  app.add_option("--station", stations, "NETNS:TAPDEV of a station (repeat for more); its radio takes the TAP's MAC")->required();
  app.add_option("--ap-host", ap_host, "NETNS:TAPDEV of a host wired behind the access point");
  app.add_option("--standard", o.standard, "802.11 standard, 5 GHz")->check(CLI::IsMember({"n", "ac", "ax"}))->capture_default_str();
  app.add_option("--width", o.width_mhz, "channel width, MHz")->check(CLI::IsMember({20, 40, 80, 160}))->capture_default_str();
  app.add_option("--mcs", mcs, "fixed MCS (one spatial stream), or 'minstrel' for Minstrel-HT rate control")->capture_default_str();
  app.add_option("--distance", o.distances_m,
                 "station to access point, m (log-distance loss, exponent 3): one for every station, or one per "
                 "station in --station order, comma-separated (unequal links: Minstrel gives the far ones slower rates)")
      ->delimiter(',')
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  app.add_option("--fading-hz", o.fading_hz, "Jakes fading with this Doppler frequency, Hz; 0: none")->check(CLI::Range(0.0, 1000.0))->capture_default_str();
  app.add_option("--wired-delay-ms", o.wired_delay_ms, "one-way delay between the access point and --ap-host, ms")->check(CLI::Range(0.0, 1000.0))->capture_default_str();
  app.add_option("--neighbour-mbps", o.neighbour_mbps, "mean Mbit/s of a bursty neighbouring network on the same channel; 0: none")->check(CLI::Range(0.0, 1000.0))->capture_default_str();
  app.add_option("--neighbour-distance", o.neighbour_distance_m, "the neighbouring network's distance from this access point, m")->check(CLI::Range(0.1, 1000.0))->capture_default_str();
  app.add_option("--mac-queue", o.mac_queue_packets, "Wi-Fi MAC queue per access category, packets")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--mac-queue-max-delay-ms", o.mac_queue_max_delay_ms, "frames queued longer are dropped, ms")->check(CLI::Range(1.0, 100000.0))->capture_default_str();
  app.add_option("--duration", o.duration_s, "seconds to run; 0: until SIGINT or SIGTERM")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--report-interval", o.report_interval_s, "seconds between lag reports")->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  app.add_option("--lag-probe-ms", o.lag_probe_ms, "how often the lag is sampled, ms")->check(CLI::Range(0.1, 1000.0))->capture_default_str();
  app.add_option("--lag-limit-ms", o.lag_limit_ms, "mean lag above which the run is not valid (exit 3), ms")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", o.seed, "ns-3 run number (random streams)")->check(CLI::PositiveNumber)->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  for (const auto& s : stations) o.stations.push_back(parse_endpoint(s, "--station"));
  if (o.distances_m.size() != 1 && o.distances_m.size() != o.stations.size())
    throw std::invalid_argument("--distance: " + std::to_string(o.distances_m.size()) + " distances for " +
                                std::to_string(o.stations.size()) + " stations (give one for all, or one per station)");
  if (!ap_host.empty()) {
    o.has_ap_host = true;
    o.ap_host = parse_endpoint(ap_host, "--ap-host");
  }
  if (mcs == "minstrel") {
    o.mcs = -1;
  } else {
    try {
      size_t used = 0;
      o.mcs = std::stoi(mcs, &used);
      if (used != mcs.size() || o.mcs < 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("--mcs '" + mcs + "': expected a number or 'minstrel'");
    }
  }
  check_rate(o);
  if (o.standard == "n" && o.width_mhz > 40) throw std::invalid_argument("--width: 802.11n goes up to 40 MHz");
  return true;
}

double distance_of(const Options& o, std::size_t station) {
  return o.distances_m.size() == 1 ? o.distances_m[0] : o.distances_m.at(station);
}

std::string data_mode(const Options& o) {
  const std::string prefix = o.standard == "n" ? "HtMcs" : o.standard == "ac" ? "VhtMcs" : "HeMcs";
  return prefix + std::to_string(o.mcs);
}

}  // namespace wifi_cell
