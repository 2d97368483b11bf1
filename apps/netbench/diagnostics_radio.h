// Radio diagnostics of a Wi-Fi interface through iw and ethtool: V0.1's "radio" section and
// the link fields (SSID, access point, frequency, signal, PHY bitrates) parsed from
// `iw dev IF link`. Without the tools every command reads as unavailable, never as a failure.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "diagnostics_commands.h"  // sibling-relative: the tests include apps/netbench headers by path

namespace wcomm::bench {

// `iw dev IF link` output -> link fields:
//  - every "label: value" line as iw prints it, value trimmed ("SSID": "lab-5g", "freq": "5180",
//    "signal": "-48 dBm", "rx bitrate": "866.7 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 2", ...);
//  - wcomm's typed additions: connected (bool), access_point (BSSID of "Connected to"),
//    frequency_mhz, signal_dbm, rx_bitrate_mbps, tx_bitrate_mbps, rx_bytes, rx_packets,
//    tx_bytes, tx_packets (numbers; present only when iw printed them).
// "Not connected." gives {"connected": false}; empty text gives {}.
nlohmann::json parse_iw_link(std::string_view text);

// V0.1's radio section for `interface`: device (iw dev IF info), link (iw dev IF link),
// link_fields (parsed from link when it succeeded, else {}), station_dump, survey_dump,
// power_save (iw dev IF get power_save), regulatory_domain (iw reg get), driver (ethtool -i),
// driver_statistics (ethtool -S), offload_features (ethtool -k); each a command result.
nlohmann::json radio_section(const std::string& interface, const CommandOptions& options = {});

// Just the link fields, for the periodic sampler: {} when iw is not installed or the command
// fails (it is then not run at all).
nlohmann::json read_link_fields(const std::string& interface, const CommandOptions& options = {});

}  // namespace wcomm::bench
