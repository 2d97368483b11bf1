// The emulator's command line: what cell to build and for which TAP devices.
#pragma once

#include <string>
#include <vector>

namespace wifi_cell {

// A TAP device inside a network namespace ("" = this process's namespace).
struct Endpoint {
  std::string netns;
  std::string device;
};

struct Options {
  std::vector<Endpoint> stations;  // one simulated station each
  bool has_ap_host = false;        // a host wired behind the access point
  Endpoint ap_host;
  std::string standard = "ax";     // n, ac or ax (5 GHz)
  int width_mhz = 40;
  int mcs = 7;                     // -1: Minstrel-HT picks the rate
  // Station to access point, m: one per station (in --station order), or one for all.
  std::vector<double> distances_m{5.0};
  double fading_hz = 0.0;          // Jakes Doppler frequency; 0: no fading
  double wired_delay_ms = 0.0;     // one way, between the access point and its host
  double neighbour_mbps = 0.0;     // mean load of a bursty neighbouring network; 0: none
  double neighbour_distance_m = 10.0;
  int mac_queue_packets = 500;     // per access category, every radio (ns-3's default)
  double mac_queue_max_delay_ms = 500.0;  // older frames are dropped (ns-3's default)
  double duration_s = 0.0;         // 0: until SIGINT / SIGTERM
  double report_interval_s = 1.0;
  double lag_probe_ms = 1.0;
  double lag_limit_ms = 1.0;       // mean lag above this: the run is not valid
  unsigned seed = 1;
};

// Parses argv; throws std::invalid_argument with a message for the user on a bad argument.
// Returns false when --help was printed.
bool parse_options(int argc, char** argv, Options& out);

// Station i's distance from the access point (Options::distances_m).
double distance_of(const Options& o, std::size_t station);

// "HeMcs7" etc.: the ns-3 mode name of a fixed rate for the chosen standard.
std::string data_mode(const Options& options);

}  // namespace wifi_cell
