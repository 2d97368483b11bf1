// run_sweep: derive, order and run the cells; skip those finished in an earlier run of the same
// sweep; keep summary.json current after every cell; draw summary.html at the end.
#include "cluster/cluster_sweep.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "netbench/report.h"
#include "cluster/sweep_plan.h"
#include "cluster/topology.h"
#include "cluster/sweep_html.h"
#include "wcomm/errors.h"

namespace wcomm::tools {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << text)) throw std::runtime_error("cannot write '" + tmp.string() + "'");
  }
  fs::rename(tmp, path);
}

nlohmann::json cell_summary(const cluster::SweepVariant& v, const SweepOptions& o, const std::string& report_path,
                            const nlohmann::json& report, std::int64_t payload, bool resumed) {
  nlohmann::json settings = {{"rounds", o.rounds}, {"warmup_rounds", o.warmup_rounds}};
  if (!v.extra_key.empty()) settings[v.extra_key] = v.extra_value;
  nlohmann::json out = {{"name", v.name}, {"suite", v.suite}, {"collective", v.collective}, {"payload_bytes", payload},
                        {"ring", v.ring}, {"settings", settings}, {"report", report_path}, {"resumed", resumed}};
  if (!v.comm.empty()) out["comm"] = v.comm;
  const nlohmann::json entry = report.value("collective_summary", nlohmann::json::object())
                                   .value(v.collective, nlohmann::json::object())
                                   .value(std::to_string(payload), nlohmann::json::object());
  out["completion_ms"] = entry.value("collective_completion_ms", nlohmann::json(nullptr));
  if (v.collective == "ring_exchange" || v.collective == "all_to_all_exchange") {
    out["jain_fairness"] = entry.value("jain_fairness", nlohmann::json(nullptr));
    out["effective_round_mbps"] = entry.value("effective_round_mbps", nlohmann::json(nullptr));
  }
  return out;
}

}  // namespace

int run_sweep(const SweepOptions& o) {
  auto say = [&](const std::string& line) { std::fprintf(stderr, "sweep: %s\n", line.c_str()); };
  std::vector<cluster::SweepVariant> variants;
  YAML::Node base;
  try {
    variants = cluster::sweep_variants(o.suites);
    if (variants.empty()) throw InvalidArgumentError("--suites selects no experiment");
    if (o.rounds <= 0 || o.warmup_rounds < 0) throw InvalidArgumentError("--rounds must be positive and --warmup-rounds not negative");
    if (o.payload_bytes < 0) throw InvalidArgumentError("--payload-bytes must be positive");
    if (o.first_port <= 0 || o.first_port + 8 * static_cast<int>(variants.size()) > 65535)
      throw InvalidArgumentError("--first-port leaves no room for " + std::to_string(variants.size()) + " cells of 8 ports");
    base = YAML::LoadFile(o.config_path);
    if (!base.IsMap()) throw InvalidArgumentError(o.config_path + ": base cluster configuration must be a mapping");
  } catch (const YAML::Exception& e) {
    std::fprintf(stderr, "wcomm cluster sweep: error: %s: %s\n", o.config_path.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm cluster sweep: error: %s\n", e.what());
    return 2;
  }
  for (auto& v : variants)
    if (o.payload_bytes > 0) v.payload_bytes = o.payload_bytes;
  const std::vector<std::size_t> order = cluster::python_shuffle_order(variants.size(), o.seed);

  if (o.dry_run) {
    nlohmann::json cells = nlohmann::json::array();
    for (std::size_t position = 0; position < order.size(); ++position) {
      const cluster::SweepVariant& v = variants[order[position]];
      YAML::Emitter emitter;
      emitter << cluster::variant_config(base, v, o.first_port + 8 * static_cast<int>(position), o.rounds, o.warmup_rounds);
      cells.push_back({{"name", v.name}, {"suite", v.suite}, {"config", emitter.c_str()}});
    }
    std::cout << nlohmann::json({{"seed", o.seed}, {"cells", cells}}).dump(2) << std::endl;
    return 0;
  }
  const fs::path dir(o.output_dir);
  fs::create_directories(dir / "configs");
  fs::create_directories(dir / "reports");
  // What makes two runs the same sweep: a finished cell is reused only by the same sweep.
  nlohmann::json suites_sorted = o.suites;
  std::sort(suites_sorted.begin(), suites_sorted.end());
  const nlohmann::json state = {{"seed", o.seed},           {"suites", suites_sorted},
                                {"rounds", o.rounds},       {"warmup_rounds", o.warmup_rounds},
                                {"first_port", o.first_port}, {"payload_bytes", o.payload_bytes},
                                {"launcher", o.launch.launcher}};
  const fs::path state_path = dir / "sweep-state.json";
  if (fs::exists(state_path) && !o.restart) {
    nlohmann::json previous;
    try {
      previous = read_json(state_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "wcomm cluster sweep: error: %s is unreadable (%s); use --restart\n", state_path.c_str(), e.what());
      return 2;
    }
    if (previous != state) {
      std::fprintf(stderr,
                   "wcomm cluster sweep: error: %s holds another sweep (%s); use the same settings to resume it, "
                   "another --output-dir, or --restart\n",
                   o.output_dir.c_str(), previous.dump().c_str());
      return 2;
    }
  }
  if (o.restart)
    for (auto& v : variants) fs::remove(dir / "reports" / (v.name + ".json"));
  write_text(state_path, state.dump(2) + "\n");

  std::string names;
  for (std::size_t i : order) names += (names.empty() ? "" : ", ") + variants[i].name;
  say("seed " + std::to_string(o.seed) + ", " + std::to_string(variants.size()) + " cells in this order: " + names);

  nlohmann::json summary = {{"seed", o.seed}, {"rounds", o.rounds}, {"warmup_rounds", o.warmup_rounds},
                            {"suites", o.suites}, {"launcher", o.launch.launcher}, {"completed", nlohmann::json::array()},
                            {"remaining", nlohmann::json::array()}};
  auto write_summary = [&](std::size_t next) {
    summary["remaining"] = nlohmann::json::array();
    for (std::size_t k = next; k < order.size(); ++k) summary["remaining"].push_back(variants[order[k]].name);
    write_text(dir / "summary.json", summary.dump(2) + "\n");
  };
  int ran = 0, skipped = 0;
  for (std::size_t position = 0; position < order.size(); ++position) {
    const cluster::SweepVariant& v = variants[order[position]];
    const std::string tag = "cell " + std::to_string(position + 1) + "/" + std::to_string(order.size()) + " " + v.name;
    const int port = o.first_port + 8 * static_cast<int>(position);
    const fs::path config_path = dir / "configs" / (v.name + ".yaml");
    const fs::path report_path = dir / "reports" / (v.name + ".json");
    YAML::Emitter emitter;
    emitter << cluster::variant_config(base, v, port, o.rounds, o.warmup_rounds);
    write_text(config_path, std::string(emitter.c_str()) + "\n");
    nlohmann::json report;
    bool resumed = false;
    if (fs::exists(report_path)) {
      say(tag + ": finished in an earlier run, skipped");
      report = read_json(report_path);
      resumed = true;
      ++skipped;
    } else {
      if (launch_interrupted()) {
        write_summary(position);
        say("interrupted before " + tag + "; run the same command again to finish the " +
            std::to_string(order.size() - position) + " cells left");
        return 130;
      }
      say(tag + ": launching (base port " + std::to_string(port) + ")");
      LaunchOutcome outcome;
      try {
        LaunchOptions launch = o.launch;
        launch.config_path = config_path.string();
        launch.timeout = o.launch_timeout;
        outcome = launch_cluster(cluster::load_topology(config_path.string()), launch);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "wcomm cluster sweep: error: %s: %s\n", v.name.c_str(), e.what());
        write_summary(position);
        return 2;
      }
      if (outcome.exit_code != 0) {
        bench::write_report(outcome.report, (dir / "reports" / (v.name + ".failed.json")).string());
        write_summary(position);
        const std::size_t left = order.size() - position;
        if (outcome.exit_code == 130)
          say("interrupted at " + tag + "; run the same command again to finish the " + std::to_string(left) +
              " cells left");
        else
          say(tag + " failed: " + outcome.report["failure"].value("reason", std::string("?")) + " (report: " +
              (dir / "reports" / (v.name + ".failed.json")).string() + ")");
        return outcome.exit_code;
      }
      report = outcome.report;
      bench::write_report(report, report_path.string());
      ++ran;
    }
    summary["completed"].push_back(cell_summary(v, o, report_path.string(), report, v.payload_bytes, resumed));
    const nlohmann::json& c = summary["completed"].back()["completion_ms"];
    if (!resumed && c.is_object()) {
      char line[128];
      std::snprintf(line, sizeof line, ": done, completion p50 %.3f ms, p95 %.3f ms", c.value("p50", 0.0), c.value("p95", 0.0));
      say(tag + line);
    }
    write_summary(position + 1);
  }
  const bench::HtmlReport page = render_sweep_html(summary, "summary.json");
  write_text(dir / "summary.html", page.html);
  say("all " + std::to_string(order.size()) + " cells done (" + std::to_string(ran) + " run now, " +
      std::to_string(skipped) + " from an earlier run); wrote " + (dir / "summary.json").string() + " and " +
      (dir / "summary.html").string());
  std::cout << summary.dump(2) << std::endl;
  return 0;
}

}  // namespace wcomm::tools
