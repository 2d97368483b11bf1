// `wcomm multirank` end to end: local ranks, V0.1's two-host mode on loopback and across two
// network namespaces, real reductions, report keys against V0.1's reference report, and bad
// input (exit status and message).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "netns_util.h"
#include "process_util.h"

namespace wcomm::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Process;
using testing::TempDir;

// A base port with `count` consecutive ports free now.
int free_port_range(int count) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int base = 20000 + (::getpid() * 7919 + attempt * 104729) % 40000;
    bool ok = true;
    for (int p = base; p < base + count && ok; ++p) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(p));
      ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
    }
    if (ok) return base;
  }
  return 29000;
}

json reference() {
  return json::parse(testing::read_text_file(std::string(WCOMM_TEST_DATA) + "/reference-reports/v0.1-multirank-loopback.json"));
}

std::set<std::string> keys(const json& j) {
  std::set<std::string> out;
  for (auto& [k, v] : j.items()) out.insert(k);
  return out;
}

void expect_summary_shape(const json& report, int world, int rounds) {
  const json ref = reference();
  const json& ref_entry = ref["collective_summary"]["allgather"]["1024"];
  for (auto& [collective, sizes] : report["collective_summary"].items())
    for (auto& [size, entry] : sizes.items()) {
      EXPECT_EQ(keys(entry), keys(ref_entry)) << collective << " " << size;
      EXPECT_EQ(keys(entry["collective_completion_ms"]), keys(ref_entry["collective_completion_ms"]));
      EXPECT_EQ(entry["per_rank_ms"].size(), static_cast<std::size_t>(world));
      EXPECT_EQ(entry["completion_samples_ms"].size(), static_cast<std::size_t>(rounds));
    }
  ASSERT_EQ(report["rank_results"].size(), static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) EXPECT_EQ(report["rank_results"][r]["rank"], r);
  // V0.1's eight settings, plus wcomm's reduce, dtype and algorithm.
  std::set<std::string> settings = keys(ref["settings"]);
  settings.insert({"reduce", "dtype", "algorithm"});
  EXPECT_EQ(keys(report["settings"]), settings);
}

TEST(MultirankCli, LocalRanksWithRealReductions) {
  TempDir dir;
  std::string out = (dir.path() / "local.json").string();
  auto r = testing::run_process({WCOMM_CLI, "multirank", "--local-ranks", "3", "--base-port",
                                 std::to_string(free_port_range(3)), "--output", out, "initiator", "--payload-sizes",
                                 "12,3000", "--rounds", "3", "--warmup-rounds", "1", "--reduce", "sum", "--dtype",
                                 "float32", "--timeout", "20"},
                                dir.path(), "local", 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ring_allreduce 3000 B"), std::string::npos) << "progress on stderr: " << r.err;
  json report = json::parse(testing::read_text_file(out));
  EXPECT_EQ(report["mode"], "local_ranks_on_one_host");
  EXPECT_EQ(report["settings"]["reduce"], "sum");
  EXPECT_EQ(report["settings"]["dtype"], "float32");
  expect_summary_shape(report, 3, 3);
  EXPECT_EQ(keys(report["collective_summary"]), (std::set<std::string>{"barrier", "broadcast", "allgather", "ring_allreduce"}));

  // `wcomm report` draws it, and V0.1's multirank report too.
  for (std::string source : {out, std::string(WCOMM_TEST_DATA) + "/reference-reports/v0.1-multirank-loopback.json"}) {
    std::string html = (dir.path() / "page.html").string();
    auto rep = testing::run_process({WCOMM_CLI, "report", source, "-o", html, "--svg-dir", (dir.path() / "svg").string()},
                                    dir.path(), "report", 30s);
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    std::string page = testing::read_text_file(html);
    EXPECT_NE(page.find("id=\"plot-latency-ring_allreduce\""), std::string::npos);
    EXPECT_NE(page.find("per-rank p50 max ms"), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "svg" / "latency-barrier.svg"));
  }

  // wcomm's own allreduce (Group), for every algorithm.
  for (std::string algorithm : {"auto", "ring", "recursive_doubling"}) {
    auto g = testing::run_process({WCOMM_CLI, "multirank", "--quiet", "--local-ranks", "4", "--base-port",
                                   std::to_string(free_port_range(4)), "initiator", "--collectives", "ring_allreduce",
                                   "--payload-sizes", "64,400000", "--rounds", "2", "--reduce", "max", "--dtype",
                                   "bfloat16", "--algorithm", algorithm, "--timeout", "20"},
                                  dir.path(), "group-" + algorithm, 60s);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_EQ(json::parse(g.out)["settings"]["algorithm"], algorithm);
  }
}

// Runs V0.1's two-host mode: a responder and an initiator, each in `ns` (or here when empty).
void two_hosts(const std::string& ns_a, const std::string& host_a, const std::string& ns_b, const std::string& host_b) {
  TempDir dir;
  std::string port = std::to_string(free_port_range(4));
  auto in_ns = [](const std::string& ns, std::vector<std::string> argv) {
    if (!ns.empty()) argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
    return argv;
  };
  auto responder = Process::spawn(in_ns(ns_b, {WCOMM_CLI, "multirank", "--local-host", host_b, "--remote-host", host_a,
                                               "--base-port", port, "--output", (dir.path() / "responder.json").string(),
                                               "responder"}),
                                  dir.path(), "responder");
  std::string out = (dir.path() / "initiator.json").string();
  auto initiator = testing::run_process(
      in_ns(ns_a, {WCOMM_CLI, "multirank", "--local-host", host_a, "--remote-host", host_b, "--base-port", port,
                   "--output", out, "initiator", "--payload-sizes", "1024,65536", "--rounds", "5", "--timeout", "20",
                   "--reduce", "sum", "--dtype", "float32"}),
      dir.path(), "initiator", 60s);
  auto responder_exit = responder.wait_for(20s);
  ASSERT_EQ(initiator.exit_code, 0) << initiator.err << responder.output();
  ASSERT_EQ(responder_exit, 0) << responder.output();
  json report = json::parse(testing::read_text_file(out));
  EXPECT_EQ(keys(report), keys(reference())) << "the initiator report has V0.1's top-level keys";
  EXPECT_EQ(report["mode"], reference()["mode"]);
  EXPECT_EQ(report["world_size"], 4);
  expect_summary_shape(report, 4, 5);
  EXPECT_EQ(report["side"]["local_ranks"], json({0, 2}));
  EXPECT_EQ(report["remote_side"]["local_ranks"], json({1, 3}));
  EXPECT_EQ(keys(report["side"]), keys(reference()["side"]));
  json responder_report = json::parse(testing::read_text_file(dir.path() / "responder.json"));
  EXPECT_EQ(responder_report["settings"]["reduce"], "sum");
  EXPECT_EQ(responder_report["rank_results"].size(), 2u);
}

TEST(MultirankCli, TwoHostModeOnLoopback) { two_hosts("", "127.0.0.1", "", "127.0.0.1"); }

TEST(MultirankCli, TwoHostModeAcrossNetworkNamespaces) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (ip netns)";
  testing::Namespaces ns("wcomm-mr");
  std::string why;
  if (!ns.create(why)) GTEST_SKIP() << "no network namespaces here: " << why;
  two_hosts(ns.a, "192.0.2.1", ns.b, "192.0.2.2");
}

TEST(MultirankCli, ExchangeCollectivesHaveV01SummaryKeys) {
  TempDir dir;
  auto r = testing::run_process({WCOMM_CLI, "multirank", "--quiet", "--local-ranks", "4", "--base-port",
                                 std::to_string(free_port_range(4)), "initiator", "--collectives",
                                 "ring_exchange,all_to_all_exchange", "--payload-sizes", "4096", "--rounds", "3",
                                 "--ring-exchange-concurrency", "2", "--timeout", "20"},
                                dir.path(), "exchange", 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(r.out);
  for (std::string c : {"ring_exchange", "all_to_all_exchange"}) {
    const json& entry = report["collective_summary"][c]["4096"];
    for (const char* key : {"send_service_ms", "jain_fairness", "effective_round_mbps"}) EXPECT_TRUE(entry.contains(key)) << c << " " << key;
    EXPECT_EQ(entry["send_service_ms"].size(), 4u);
    const json& rank0 = report["rank_results"][0]["send_service_ms"][c]["4096"];
    ASSERT_EQ(rank0.size(), 3u);
    EXPECT_EQ(rank0[0].size(), c == "ring_exchange" ? 1u : 3u);
  }
}

TEST(MultirankCli, BadInputSaysWhat) {
  TempDir dir;
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {WCOMM_CLI, "multirank"});
    return testing::run_process(args, dir.path(), "bad", 30s);
  };
  auto r = run({"--local-ranks", "4", "--base-port", std::to_string(free_port_range(4)), "initiator", "--payload-sizes", "1001"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("multiples of 4 bytes"), std::string::npos) << r.err;
  r = run({"--local-ranks", "2", "initiator", "--collectives", "barrier,all_to_all"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown collective"), std::string::npos) << r.err;
  r = run({"--local-ranks", "2", "initiator", "--dtype", "complex64"});
  EXPECT_NE(r.err.find("unknown dtype"), std::string::npos) << r.err;
  r = run({"--local-ranks", "2", "initiator", "--broadcast-root", "2"});
  EXPECT_NE(r.err.find("broadcast root must be smaller than world size"), std::string::npos) << r.err;
  r = run({"initiator"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--local-host and --remote-host are required"), std::string::npos) << r.err;
  r = run({"--local-ranks", "2", "responder"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace wcomm::test
