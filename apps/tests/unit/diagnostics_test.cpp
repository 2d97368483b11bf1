// Unit tests of the benchmark diagnostics: each collector against this machine's real /proc,
// /sys and tools (on lo), with tools missing, the parsers against fixed samples of real
// output, and the report shapes against the V0.1 reference report.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

// The bench layer's headers live under src/ (not a public include directory).
#include "netbench/diagnostics.h"
#include "netbench/diagnostics_commands.h"
#include "netbench/diagnostics_ping.h"
#include "netbench/diagnostics_proc.h"
#include "netbench/diagnostics_radio.h"
#include "netbench/diagnostics_text.h"
#include "netbench/link_sampler.h"
#include "reference_report.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;
using testing::keys_of;
using testing::reference_report;
namespace fs = std::filesystem;

// `ours` has exactly the keys of `reference` at every level (objects) and the same kind of
// value wherever both are non-null; arrays compare their first elements.
void expect_same_shape(const json& ours, const json& reference, const std::string& where) {
  if (ours.is_null() || reference.is_null()) return;
  if (reference.is_object()) {
    ASSERT_TRUE(ours.is_object()) << where;
    EXPECT_EQ(keys_of(ours), keys_of(reference)) << where;
    for (const auto& [key, value] : reference.items()) {
      if (ours.contains(key)) expect_same_shape(ours[key], value, where + "." + key);
    }
  } else if (reference.is_array()) {
    ASSERT_TRUE(ours.is_array()) << where;
    if (!ours.empty() && !reference.empty()) expect_same_shape(ours[0], reference[0], where + "[0]");
  } else if (reference.is_number()) {
    EXPECT_TRUE(ours.is_number()) << where;
  } else {
    EXPECT_EQ(ours.type(), reference.type()) << where;
  }
}

void expect_command_result(const json& result, const std::string& where) {
  ASSERT_TRUE(result.is_object()) << where;
  EXPECT_EQ(keys_of(result), (std::set<std::string>{"available", "command", "returncode", "stderr", "stdout"})) << where;
}

void expect_not_installed(const json& result, const std::string& tool) {
  expect_command_result(result, tool);
  EXPECT_EQ(result["available"], false);
  EXPECT_TRUE(result["returncode"].is_null());
  EXPECT_EQ(result["stderr"], tool + " is not installed");
  EXPECT_EQ(result["stdout"], "");
}

// A directory whose PATH offers only the given tools (symlinks to this machine's copies).
class ToolDir {
 public:
  explicit ToolDir(const std::vector<std::string>& tools) {
    path_ = fs::temp_directory_path() / ("wcomm-diag-tools-" + std::to_string(::getpid()));
    fs::create_directories(path_);
    for (const auto& tool : tools) {
      const auto real = find_executable(tool);
      if (real) fs::create_symlink(*real, path_ / tool);
    }
  }
  ~ToolDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// ---------------------------------------------------------------------------------------------
// External commands

TEST(DiagnosticsCommands, RunsARealToolAndCapturesItsOutput) {
  const json result = run_command({"ip", "-j", "address", "show", "dev", "lo"});
  expect_command_result(result, "ip");
  EXPECT_EQ(result["available"], true);
  EXPECT_EQ(result["returncode"], 0);
  EXPECT_EQ(result["command"], json({"ip", "-j", "address", "show", "dev", "lo"}));
  const json addresses = json::parse(result["stdout"].get<std::string>());
  ASSERT_TRUE(addresses.is_array());
  ASSERT_FALSE(addresses.empty());
  EXPECT_EQ(addresses[0]["ifname"], "lo");
}

TEST(DiagnosticsCommands, MissingToolIsAnObservationNotAFailure) {
  expect_not_installed(run_command({"wcomm-no-such-tool", "--version"}), "wcomm-no-such-tool");
  CommandOptions no_tools;
  no_tools.search_path = "/nonexistent-wcomm-dir";
  expect_not_installed(run_command({"ip", "route"}, no_tools), "ip");
  EXPECT_FALSE(find_executable("ip", no_tools.search_path).has_value());
  EXPECT_TRUE(find_executable("ip").has_value());
}

TEST(DiagnosticsCommands, ExitStatusSignalsAndStrippedOutput) {
  const json failed = run_command({"sh", "-c", "printf '  out line \\n\\n'; echo ' err ' >&2; exit 3"});
  EXPECT_EQ(failed["returncode"], 3);
  EXPECT_EQ(failed["stdout"], "out line");
  EXPECT_EQ(failed["stderr"], "err");
  const json killed = run_command({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(killed["returncode"], -15);  // Python's subprocess convention, as V0.1 recorded it
}

TEST(DiagnosticsCommands, ChildRunsInTheCLocaleWithoutStdin) {
  const json result = run_command({"sh", "-c", "echo \"$LC_ALL\"; cat; echo end"});
  EXPECT_EQ(result["stdout"], "C\nend");
}

TEST(DiagnosticsCommands, TimeoutKillsTheToolAndItsChildren) {
  CommandOptions options;
  options.timeout = std::chrono::milliseconds(200);
  const auto started = std::chrono::steady_clock::now();
  // The grandchild keeps the pipe open: only killing the process group ends the wait.
  const json result = run_command({"sh", "-c", "echo before; sleep 30 & sleep 30"}, options);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(elapsed, 10.0);
  EXPECT_EQ(result["available"], true);
  EXPECT_TRUE(result["returncode"].is_null());
  EXPECT_EQ(result["stdout"], "before");
  EXPECT_NE(result["stderr"].get<std::string>().find("timed out after 0.2 s"), std::string::npos);
}

TEST(DiagnosticsCommands, TimeoutHoldsForAToolThatClosesItsOutput) {
  CommandOptions options;
  options.timeout = std::chrono::milliseconds(300);
  const auto started = std::chrono::steady_clock::now();
  const json result = run_command({"sh", "-c", "echo early; exec >/dev/null 2>&1; sleep 30"}, options);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 10.0);
  EXPECT_TRUE(result["returncode"].is_null());
  EXPECT_EQ(result["stdout"], "early");
  EXPECT_EQ(result["stderr"], "timed out after 0.3 s");
}

TEST(DiagnosticsCommands, InvalidUtf8OutputStillDumps) {
  const json result = run_command({"sh", "-c", "printf 'a\\377b'"});
  EXPECT_EQ(result["stdout"], "a\xEF\xBF\xBD" "b");
  EXPECT_NO_THROW((void)result.dump());
}

// ---------------------------------------------------------------------------------------------
// /proc and /sys parsers on fixed text

TEST(DiagnosticsProc, ParsesSoftirqs) {
  const std::string text =
      "                    CPU0       CPU1       CPU2\n"
      "          HI:          0          0          0\n"
      "       TIMER:      39112      53473       1000\n"
      "      NET_TX:          4          0          7\n"
      "      NET_RX:    1148434     509151         15\n"
      "       BLOCK:          0      81749          0\n";
  const json parsed = parse_softirqs(text);
  EXPECT_EQ(keys_of(parsed), (std::set<std::string>{"NET_RX", "NET_TX"}));
  EXPECT_EQ(parsed["NET_RX"]["per_cpu"], json({1148434, 509151, 15}));
  EXPECT_EQ(parsed["NET_RX"]["total"], 1148434 + 509151 + 15);
  EXPECT_EQ(parsed["NET_TX"]["total"], 11);
}

TEST(DiagnosticsProc, ParsesSoftnetStatOfNewAndOldKernels) {
  // 6.x prints 13 columns (backlog length and CPU id at the end); 3.x printed 11.
  const std::string text =
      "0019e056 00000002 0000000a 00000000 00000000 00000000 00000000 00000000 00000001 00000003 00000004 00000000 00000000\n"
      "000ba518 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001\n";
  const json parsed = parse_softnet_stat(text);
  EXPECT_EQ(keys_of(parsed), keys_of(reference_report()["initiator"]["environment_before"]["kernel_network_counters"]["softnet"]));
  EXPECT_EQ(parsed["processed"]["per_cpu"], json({0x19e056, 0xba518}));
  EXPECT_EQ(parsed["processed"]["total"], 0x19e056 + 0xba518);
  EXPECT_EQ(parsed["dropped"]["total"], 2);
  EXPECT_EQ(parsed["time_squeeze"]["per_cpu"], json({10, 1}));
  EXPECT_EQ(parsed["cpu_collision"]["total"], 1);
  EXPECT_EQ(parsed["received_rps"]["total"], 3);
  EXPECT_EQ(parsed["flow_limit_count"]["per_cpu"], json({4, 1}));
}

TEST(DiagnosticsProc, PicksTheInterfacesIrqLines) {
  const std::string text =
      "           CPU0       CPU1       \n"
      " 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n"
      " 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n"
      " 38:          0       1553 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n"
      " 39:       1138          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n"
      " 40:         99         99 PCI-MSIX-0000:00:04.0   0-edge      virtio20-config\n"
      "130:        500         20  IR-PCI-MSI 1572864-edge      iwlwifi:default_queue\n"
      "131:          7          8  IR-PCI-MSI 1572865-edge      iwlwifi:queue_1\n"
      " 16:          3          4  IO-APIC  16-fasteoi   ehci_hcd:usb1, wlan1\n"
      "NMI:          0          0   Non-maskable interrupts\n"
      "ERR:          0\n";
  const json virtio = parse_interface_interrupts(text, {"eth0", "virtio2", "virtio_net"});
  ASSERT_TRUE(virtio.is_object());
  EXPECT_EQ(keys_of(virtio["irqs"]), (std::set<std::string>{"37", "38", "39"}));  // not virtio20
  EXPECT_EQ(virtio["per_cpu"], json({1138, 1553}));
  EXPECT_EQ(virtio["total"], 2691);
  EXPECT_EQ(virtio["irqs"]["38"]["description"], "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0");
  const json wifi = parse_interface_interrupts(text, {"wlp2s0", "0000:02:00.0", "iwlwifi"});
  EXPECT_EQ(keys_of(wifi["irqs"]), (std::set<std::string>{"130", "131"}));
  EXPECT_EQ(wifi["total"], 535);
  const json shared = parse_interface_interrupts(text, {"wlan1"});
  EXPECT_EQ(keys_of(shared["irqs"]), (std::set<std::string>{"16"}));
  EXPECT_TRUE(parse_interface_interrupts(text, {"lo"}).is_null());
  EXPECT_TRUE(parse_interface_interrupts(text, {}).is_null());
}

TEST(DiagnosticsProc, ParsesMeminfoAndContextSwitches) {
  const json memory = parse_meminfo(
      "MemTotal:       24683652 kB\nMemFree:        17719244 kB\nMemAvailable:   23914940 kB\n"
      "SwapTotal:             0 kB\nSwapFree:              0 kB\n");
  EXPECT_EQ(memory, json({{"MemTotal_kib", 24683652}, {"MemAvailable_kib", 23914940}, {"SwapTotal_kib", 0}, {"SwapFree_kib", 0}}));
  EXPECT_EQ(keys_of(memory), keys_of(reference_report()["initiator"]["environment_before"]["memory"]));
  EXPECT_EQ(parse_context_switches("cpu  1 2 3\nintr 5\nctxt 3450808\nbtime 1\n"), 3450808u);
  EXPECT_FALSE(parse_context_switches("cpu 1 2 3\n").has_value());
}

// ---------------------------------------------------------------------------------------------
// /proc and /sys readers on this machine

TEST(DiagnosticsProc, ReadsThisMachinesKernelCounters) {
  const json counters = read_kernel_network_counters(interface_irq_names("lo"));
  expect_same_shape(counters, reference_report()["initiator"]["environment_before"]["kernel_network_counters"],
                    "kernel_network_counters");
  EXPECT_TRUE(counters["interface_irq"].is_null());  // loopback has no IRQ
  EXPECT_GT(counters["context_switches"].get<long long>(), 0);
  // One per-CPU value per CPU of /proc/softirqs, which lists every CPU of this machine.
  const std::string softirqs = read_text_file("/proc/softirqs").value();
  const auto header = split_fields(split_lines(softirqs)[0]);
  const auto online = static_cast<std::size_t>(::sysconf(_SC_NPROCESSORS_ONLN));
  for (const char* kind : {"NET_RX", "NET_TX"}) {
    const json& softirq = counters["softirqs"][kind];
    EXPECT_EQ(softirq["per_cpu"].size(), header.size()) << kind;
    EXPECT_GE(softirq["per_cpu"].size(), online) << kind;
    long long sum = 0;
    for (const auto& v : softirq["per_cpu"]) sum += v.get<long long>();
    EXPECT_EQ(softirq["total"], sum) << kind;
  }
  EXPECT_EQ(counters["softnet"]["processed"]["per_cpu"].size(), online);
}

TEST(DiagnosticsProc, InterfaceStatisticsAreMonotonic) {
  if (!find_executable("ping")) GTEST_SKIP() << "ping is not installed (scripts/bootstrap.sh installs iputils-ping)";
  const json before = read_interface_statistics("lo");
  EXPECT_EQ(keys_of(before), keys_of(reference_report()["initiator"]["interface_counter_delta"]));
  PingOptions ping;
  ping.count = 2;
  ping.interface = "lo";
  (void)run_ping("127.0.0.1", ping);  // some loopback traffic between the two readings
  const json after = read_interface_statistics("lo");
  for (const auto& [key, value] : before.items()) {
    ASSERT_TRUE(value.is_number()) << key;
    EXPECT_GE(after[key].get<long long>(), value.get<long long>()) << key;
  }
  const json delta = interface_counter_delta(before, after);
  EXPECT_GE(delta["rx_packets"].get<long long>(), 4);  // 2 echo requests + 2 replies on lo
  EXPECT_GE(delta["tx_bytes"].get<long long>(), 4 * 84);
  const json missing = read_interface_statistics("no-such-if0");
  for (const auto& [key, value] : missing.items()) EXPECT_TRUE(value.is_null()) << key;
}

TEST(DiagnosticsProc, IrqOfARealDeviceWhenThereIsOne) {
  // Any interface backed by a device with its own IRQ lines (eth0 on a VM: virtioN-input.0).
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    const std::string name = entry.path().filename().string();
    if (!fs::exists(entry.path() / "device")) continue;
    const auto names = interface_irq_names(name);
    EXPECT_EQ(names[0], name);
    EXPECT_GE(names.size(), 2u);
    const json irq = read_kernel_network_counters(names)["interface_irq"];
    if (irq.is_null()) continue;
    long long total = 0;
    for (const auto& [number, line] : irq["irqs"].items()) total += line["total"].get<long long>();
    EXPECT_EQ(irq["total"], total);
    return;
  }
  GTEST_SKIP() << "no interface with its own IRQ lines on this machine";
}

// ---------------------------------------------------------------------------------------------
// iw link and ping parsers on fixed samples

TEST(DiagnosticsRadio, ParsesIwLinkOfAConnectedStation) {
  const std::string text =
      "Connected to 3c:7c:3f:12:34:56 (on wlan0)\n"
      "\tSSID: lab-5g\n"
      "\tfreq: 5180\n"
      "\tRX: 1823450 bytes (12034 packets)\n"
      "\tTX: 402311 bytes (2876 packets)\n"
      "\tsignal: -48 dBm\n"
      "\trx bitrate: 866.7 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 2\n"
      "\ttx bitrate: 780.0 MBit/s VHT-MCS 8 80MHz short GI VHT-NSS 2\n"
      "\n"
      "\tbss flags:\tshort-preamble short-slot-time\n"
      "\tdtim period:\t3\n"
      "\tbeacon int:\t100\n";
  const json fields = parse_iw_link(text);
  EXPECT_EQ(fields["connected"], true);
  EXPECT_EQ(fields["access_point"], "3c:7c:3f:12:34:56");
  EXPECT_EQ(fields["SSID"], "lab-5g");
  EXPECT_EQ(fields["freq"], "5180");
  EXPECT_EQ(fields["signal"], "-48 dBm");
  EXPECT_EQ(fields["tx bitrate"], "780.0 MBit/s VHT-MCS 8 80MHz short GI VHT-NSS 2");
  EXPECT_EQ(fields["bss flags"], "short-preamble short-slot-time");
  EXPECT_EQ(fields["beacon int"], "100");
  EXPECT_DOUBLE_EQ(fields["frequency_mhz"].get<double>(), 5180.0);
  EXPECT_DOUBLE_EQ(fields["signal_dbm"].get<double>(), -48.0);
  EXPECT_DOUBLE_EQ(fields["rx_bitrate_mbps"].get<double>(), 866.7);
  EXPECT_DOUBLE_EQ(fields["tx_bitrate_mbps"].get<double>(), 780.0);
  EXPECT_EQ(fields["rx_bytes"], 1823450);
  EXPECT_EQ(fields["rx_packets"], 12034);
  EXPECT_EQ(fields["tx_bytes"], 402311);
  EXPECT_EQ(fields["tx_packets"], 2876);
}

TEST(DiagnosticsRadio, ParsesIwLinkOfNewerIwAndOfNoLink) {
  const json he = parse_iw_link(
      "Connected to 60:22:32:aa:bb:cc (on wlp0s20f3)\n"
      "\tSSID: home 6E\n"
      "\tfreq: 5955.0\n"
      "\tsignal: -61 dBm\n"
      "\trx bitrate: 1200.9 MBit/s 80MHz HE-MCS 11 HE-NSS 2 HE-GI 0 HE-DCM 0\n"
      "\ttx bitrate: 960.7 MBit/s 80MHz HE-MCS 9 HE-NSS 2 HE-GI 0 HE-DCM 0\n");
  EXPECT_EQ(he["SSID"], "home 6E");
  EXPECT_DOUBLE_EQ(he["frequency_mhz"].get<double>(), 5955.0);
  EXPECT_DOUBLE_EQ(he["signal_dbm"].get<double>(), -61.0);
  EXPECT_DOUBLE_EQ(he["rx_bitrate_mbps"].get<double>(), 1200.9);
  EXPECT_EQ(parse_iw_link("Not connected.\n"), json({{"connected", false}}));
  EXPECT_EQ(parse_iw_link(""), json::object());
}

TEST(DiagnosticsPing, ParsesIputilsOutput) {
  const std::string text =
      "PING 192.0.2.11 (192.0.2.11) from 192.0.2.10 wlan0: 56(84) bytes of data.\n"
      "64 bytes from 192.0.2.11: icmp_seq=1 ttl=64 time=2.91 ms\n"
      "64 bytes from 192.0.2.11: icmp_seq=2 ttl=64 time=3.40 ms\n"
      "64 bytes from 192.0.2.11: icmp_seq=4 ttl=64 time=18.2 ms\n"
      "\n"
      "--- 192.0.2.11 ping statistics ---\n"
      "4 packets transmitted, 3 received, 25% packet loss, time 603ms\n"
      "rtt min/avg/max/mdev = 2.910/8.170/18.200/7.094 ms";
  const json parsed = parse_ping_output(text);
  EXPECT_EQ(parsed["transmitted"], 4);
  EXPECT_EQ(parsed["received"], 3);
  EXPECT_DOUBLE_EQ(parsed["loss_percent"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(parsed["min_ms"].get<double>(), 2.91);
  EXPECT_DOUBLE_EQ(parsed["avg_ms"].get<double>(), 8.17);
  EXPECT_DOUBLE_EQ(parsed["max_ms"].get<double>(), 18.2);
  EXPECT_DOUBLE_EQ(parsed["jitter_ms"].get<double>(), 7.094);
  // The reference report's own ping, parsed again, gives its figures.
  const json& reference = reference_report()["ping_to_responder"];
  json again = parse_ping_output(reference["command"]["stdout"].get<std::string>());
  again["command"] = reference["command"];
  EXPECT_EQ(again, reference);
}

TEST(DiagnosticsPing, ParsesLossAndBusybox) {
  const json lost = parse_ping_output(
      "PING 192.0.2.99 (192.0.2.99) 56(84) bytes of data.\n"
      "From 192.0.2.10 icmp_seq=1 Destination Host Unreachable\n\n"
      "--- 192.0.2.99 ping statistics ---\n"
      "3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2041ms\n");
  EXPECT_EQ(lost["transmitted"], 3);
  EXPECT_EQ(lost["received"], 0);
  EXPECT_DOUBLE_EQ(lost["loss_percent"].get<double>(), 100.0);
  for (const char* key : {"min_ms", "avg_ms", "max_ms", "jitter_ms"}) EXPECT_TRUE(lost[key].is_null()) << key;
  const json busybox = parse_ping_output(
      "--- 127.0.0.1 ping statistics ---\n"
      "3 packets transmitted, 3 packets received, 0% packet loss\n"
      "round-trip min/avg/max = 0.041/0.052/0.067 ms\n");
  EXPECT_EQ(busybox["transmitted"], 3);
  EXPECT_EQ(busybox["received"], 3);
  EXPECT_DOUBLE_EQ(busybox["avg_ms"].get<double>(), 0.052);
  EXPECT_TRUE(busybox["jitter_ms"].is_null());
  const json nothing = parse_ping_output("");
  EXPECT_EQ(keys_of(nothing), (std::set<std::string>{"transmitted", "received", "loss_percent", "min_ms", "avg_ms",
                                                     "max_ms", "jitter_ms"}));
}

TEST(DiagnosticsPing, PingsLoopback) {
  if (!find_executable("ping")) GTEST_SKIP() << "ping is not installed (scripts/bootstrap.sh installs iputils-ping)";
  PingOptions options;
  options.count = 2;
  options.interface = "lo";
  const json result = run_ping("127.0.0.1", options);
  expect_same_shape(result, reference_report()["ping_to_responder"], "ping");
  ASSERT_EQ(result["command"]["returncode"], 0) << result["command"].dump();
  EXPECT_EQ(result["command"]["command"],
            json({"ping", "-n", "-c", "2", "-i", "0.2", "-W", "2", "-I", "lo", "127.0.0.1"}));
  EXPECT_EQ(result["transmitted"], 2);
  EXPECT_EQ(result["received"], 2);
  EXPECT_DOUBLE_EQ(result["loss_percent"].get<double>(), 0.0);
  EXPECT_LE(result["min_ms"].get<double>(), result["avg_ms"].get<double>());
  EXPECT_LE(result["avg_ms"].get<double>(), result["max_ms"].get<double>());
  EXPECT_GE(result["jitter_ms"].get<double>(), 0.0);
}

TEST(DiagnosticsPing, MissingPingGivesNullFigures) {
  PingOptions options;
  options.count = 1;
  options.command.search_path = "/nonexistent-wcomm-dir";
  const json result = run_ping("127.0.0.1", options);
  expect_not_installed(result["command"], "ping");
  EXPECT_TRUE(result["transmitted"].is_null());
  EXPECT_TRUE(result["avg_ms"].is_null());
}

// ---------------------------------------------------------------------------------------------
// The environment snapshot and deltas

TEST(DiagnosticsEnvironment, SnapshotOfLoopbackHasV01sShape) {
  EnvironmentOptions options;
  options.interface = "lo";
  options.peer_host = "127.0.0.1";
  const json env = capture_environment(options);
  const json& reference = reference_report()["initiator"]["environment_before"];
  expect_same_shape(env, reference, "environment");
  EXPECT_TRUE(env["python"].is_null());
  EXPECT_EQ(env["cpu_count"], ::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(env["load_average"].size(), 3u);
  EXPECT_GT(env["memory"]["MemTotal_kib"].get<long long>(), 0);
  EXPECT_TRUE(env["platform"].get<std::string>().starts_with("Linux-")) << env["platform"];
  EXPECT_NE(env["platform"].get<std::string>().find("-with-glibc"), std::string::npos);

  const json& interface = env["interface"];
  EXPECT_EQ(interface["name"], "lo");
  EXPECT_EQ(interface["address"], "00:00:00:00:00:00");
  EXPECT_EQ(interface["mtu"], std::stoll(read_text_file("/sys/class/net/lo/mtu").value()));
  EXPECT_EQ(interface["addresses"]["returncode"], 0);
  EXPECT_NE(interface["addresses"]["stdout"].get<std::string>().find("\"ifname\":\"lo\""), std::string::npos);
  EXPECT_EQ(env["route"]["command"], json({"ip", "route", "get", "127.0.0.1"}));
  EXPECT_NE(env["route"]["stdout"].get<std::string>().find("dev lo"), std::string::npos);
  EXPECT_EQ(env["qdisc"]["command"], json({"tc", "-s", "qdisc", "show", "dev", "lo"}));
  EXPECT_EQ(env["qdisc"]["returncode"], 0);
  EXPECT_NE(env["qdisc"]["stdout"].get<std::string>().find("qdisc"), std::string::npos);
  EXPECT_EQ(env["tcp_sockets"]["command"], json({"ss", "-tinm", "dst", "127.0.0.1"}));
  EXPECT_EQ(env["tcp_sockets"]["returncode"], 0);
  EXPECT_FALSE(env["tcp"]["congestion_control"].get<std::string>().empty());
  // Every radio command of V0.1, with the same argv.
  for (const auto& [key, value] : reference["radio"].items()) {
    if (key == "link_fields") continue;
    EXPECT_EQ(env["radio"][key]["command"], value["command"]) << key;
  }
  if (!find_executable("iw")) {
    expect_not_installed(env["radio"]["link"], "iw");
    EXPECT_EQ(env["radio"]["link_fields"], json::object());
  }
  if (!find_executable("ethtool")) expect_not_installed(env["radio"]["driver"], "ethtool");
  EXPECT_NO_THROW((void)env.dump());
}

TEST(DiagnosticsEnvironment, ToolsMissingAreRecordedNotFatal) {
  // Only ip on the PATH: everything else reads as not installed, the /proc and /sys parts stay.
  ToolDir tools({"ip"});
  EnvironmentOptions options;
  options.interface = "lo";
  options.peer_host = "127.0.0.1";
  options.commands.search_path = tools.path();
  const json env = capture_environment(options);
  expect_same_shape(env, reference_report()["initiator"]["environment_before"], "environment");
  EXPECT_EQ(env["route"]["returncode"], 0);
  expect_not_installed(env["qdisc"], "tc");
  expect_not_installed(env["tcp_sockets"], "ss");
  expect_not_installed(env["cpu_details"], "lscpu");
  expect_not_installed(env["clock_sync"], "timedatectl");
  expect_not_installed(env["power_mode"], "nvpmodel");
  expect_not_installed(env["radio"]["station_dump"], "iw");
  expect_not_installed(env["radio"]["offload_features"], "ethtool");
  EXPECT_EQ(env["radio"]["link_fields"], json::object());
  EXPECT_TRUE(env["interface"]["statistics"]["rx_bytes"].is_number());
  EXPECT_TRUE(env["kernel_network_counters"]["context_switches"].is_number());
}

TEST(DiagnosticsEnvironment, InterfaceFollowsTheRouteToThePeer) {
  EXPECT_EQ(interface_for_peer("127.0.0.1"), "lo");
  EXPECT_EQ(interface_for_peer(""), "");
  EnvironmentOptions options;
  options.peer_host = "127.0.0.1";
  EXPECT_EQ(capture_environment(options)["interface"]["name"], "lo");
  const json nothing = capture_environment(EnvironmentOptions{});
  EXPECT_TRUE(nothing["interface"].is_null());
  EXPECT_TRUE(nothing["route"].is_null());
  EXPECT_TRUE(nothing["radio"].is_null());
  EXPECT_TRUE(nothing["kernel_network_counters"]["context_switches"].is_number());
}

TEST(DiagnosticsEnvironment, DeltasBetweenSnapshotsHaveV01sShape) {
  if (!find_executable("ping")) GTEST_SKIP() << "ping is not installed (scripts/bootstrap.sh installs iputils-ping)";
  EnvironmentOptions options;
  options.interface = "lo";
  options.peer_host = "127.0.0.1";
  const json before = capture_environment(options);
  PingOptions ping;
  ping.count = 2;
  ping.interface = "lo";
  (void)run_ping("127.0.0.1", ping);
  const json after = capture_environment(options);
  json section = json::object();
  add_environment_section(section, before, after);
  const json& reference = reference_report()["initiator"];
  expect_same_shape(section["interface_counter_delta"], reference["interface_counter_delta"], "interface_counter_delta");
  expect_same_shape(section["kernel_counter_delta"], reference["kernel_counter_delta"], "kernel_counter_delta");
  EXPECT_GE(section["interface_counter_delta"]["rx_packets"].get<long long>(), 4);
  EXPECT_GT(section["kernel_counter_delta"]["context_switches"].get<long long>(), 0);
  const json& net_rx = section["kernel_counter_delta"]["softirqs"]["NET_RX"];
  long long sum = 0;
  for (const auto& v : net_rx["per_cpu"]) {
    EXPECT_GE(v.get<long long>(), 0);
    sum += v.get<long long>();
  }
  EXPECT_EQ(net_rx["total"], sum);
  EXPECT_EQ(section["environment_before"], before);
}

TEST(DiagnosticsEnvironment, CounterDeltaRules) {
  const json before = {{"a", 10}, {"per_cpu", {1, 2, 3}}, {"gone", 5}, {"x", nullptr}, {"name", "old"},
                       {"irq", {{"irqs", {{"38", {{"description", "virtio2-input.0"}, {"total", 4}}}}}}}};
  const json after = {{"a", 15}, {"per_cpu", {2, 2, 9}}, {"new", 1}, {"x", 3}, {"name", "new"},
                      {"irq", {{"irqs", {{"38", {{"description", "virtio2-input.0"}, {"total", 9}}}}}}}};
  const json delta = counter_delta(before, after);
  EXPECT_EQ(delta, json({{"a", 5}, {"per_cpu", {1, 0, 6}}, {"x", nullptr}, {"name", "new"},
                         {"irq", {{"irqs", {{"38", {{"description", "virtio2-input.0"}, {"total", 5}}}}}}}}));
  EXPECT_TRUE(counter_delta(nullptr, after).is_null());
  // The reference report's own delta is after - before of its own snapshots.
  const json& initiator = reference_report()["initiator"];
  EXPECT_EQ(kernel_counter_delta(initiator["environment_before"]["kernel_network_counters"],
                                 initiator["environment_after"]["kernel_network_counters"]),
            initiator["kernel_counter_delta"]);
  EXPECT_EQ(interface_counter_delta(initiator["environment_before"]["interface"]["statistics"],
                                    initiator["environment_after"]["interface"]["statistics"]),
            initiator["interface_counter_delta"]);
}

// ---------------------------------------------------------------------------------------------
// The periodic sampler

TEST(LinkSampler, SampleHasV01sShape) {
  const json sample = take_link_sample("lo", interface_irq_names("lo"), false);
  expect_same_shape(sample, reference_report()["initiator"]["link_samples"][0], "link_samples[0]");
  EXPECT_EQ(sample["link_fields"], json::object());
}

TEST(LinkSampler, SamplesPeriodicallyAndCheaply) {
  LinkSamplerOptions options;
  options.interface = "lo";
  options.interval_s = 0.02;
  LinkSampler sampler(options);
  sampler.start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sampler.samples().size() < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const json samples = sampler.stop();
  ASSERT_GE(samples.size(), 5u);
  EXPECT_EQ(sampler.stop(), samples);  // stop is idempotent
  const json& reference = reference_report()["initiator"]["link_samples"][0];
  for (std::size_t i = 0; i < samples.size(); ++i) {
    expect_same_shape(samples[i], reference, "link_samples[" + std::to_string(i) + "]");
    if (i == 0) continue;
    EXPECT_GT(samples[i]["captured_at_unix_s"].get<double>(), samples[i - 1]["captured_at_unix_s"].get<double>());
    for (const auto& [key, value] : samples[i]["interface_statistics"].items()) {
      EXPECT_GE(value.get<long long>(), samples[i - 1]["interface_statistics"][key].get<long long>()) << key;
    }
  }
  // Cheap: a sample costs well under 10 ms of CPU (at the default 1 s interval that is under
  // 1% of a core; a sanitizer build is several times slower and still passes).
  EXPECT_GT(sampler.cpu_seconds(), 0.0);
  EXPECT_LT(sampler.cpu_seconds() / static_cast<double>(samples.size()), 0.010);
}

TEST(LinkSampler, StopsPromptlyAndRejectsABadInterval) {
  LinkSamplerOptions options;
  options.interface = "lo";
  options.interval_s = 3600.0;
  LinkSampler sampler(options);
  sampler.start();
  const auto started = std::chrono::steady_clock::now();
  while (sampler.samples().empty() && std::chrono::steady_clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const json samples = sampler.stop();  // wakes the hour-long wait at once
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 15.0);
  EXPECT_EQ(samples.size(), 1u);
  LinkSamplerOptions bad;
  bad.interval_s = 0.0;
  EXPECT_THROW(LinkSampler{bad}, std::invalid_argument);
}

}  // namespace
}  // namespace wcomm::bench
