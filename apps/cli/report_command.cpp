// `wcomm report RUN.json -o RUN.html [--svg-dir DIR]`: a benchmark report as one
// self-contained HTML page, and optionally each plot as its own SVG file.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "netbench/fanout_html.h"
#include "netbench/flows_html.h"
#include "netbench/html_report.h"
#include "cli/cli_parse.h"
#include "cli/commands.h"
#include "multirank/multirank_html.h"
#include "cluster/sweep_html.h"

namespace wcomm::tools {
namespace {

namespace fs = std::filesystem;

// Written via a temporary file and a rename, so a browser refreshing the page never reads
// half of it.
void write_file(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write '" + temporary.string() + "': " + std::strerror(errno));
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write '" + temporary.string() + "': " + std::strerror(errno));
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) throw std::runtime_error("cannot move '" + temporary.string() + "' to '" + path.string() + "': " + error.message());
}

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error("'" + path + "' is not a JSON benchmark report: " + e.what());
  }
}

}  // namespace

int run_report(int argc, char** argv) {
  CLI::App app{"Render a `wcomm bench` JSON report as one self-contained HTML page with inline SVG plots "
               "(nothing is fetched from the network).",
               "wcomm report"};
  std::string input;
  std::string output;
  std::string svg_dir;
  bool quiet = false;
  app.add_option("report", input, "the report (JSON): wcomm bench initiator or fanout (or V0.1), wcomm multirank, a cluster sweep, or the Wi-Fi cell's flows study")->required();
  app.add_option("-o,--output", output, "the HTML page to write (default: the report's name with .html)");
  app.add_option("--svg-dir", svg_dir, "also write each plot as DIR/<plot>.svg");
  app.add_flag("--quiet", quiet, "do not list the files written on stderr");
  if (auto exit_code = parse_command_line(app, argc, argv)) return *exit_code;
  if (output.empty()) output = fs::path(input).replace_extension(".html").string();
  if (fs::path(output) == fs::path(input)) {
    std::fprintf(stderr, "wcomm report: the output '%s' would overwrite the report\n", output.c_str());
    return 2;
  }
  try {
    const nlohmann::json report = read_report(input);
    if (!report.is_object()) throw std::runtime_error("'" + input + "' is not a JSON object (a benchmark report is one)");
    const std::string name = fs::path(input).filename().string();
    const bench::HtmlReport page = is_sweep_summary(report)       ? render_sweep_html(report, name)
                                   : is_multirank_report(report) ? render_multirank_html(report, name)
                                   : bench::is_fanout_report(report) ? bench::render_fanout_html(report, name)
                                   : bench::is_flows_report(report)  ? bench::render_flows_html(report, name)
                                                                 : bench::render_html_report(report, name);
    write_file(output, page.html);
    if (!quiet) std::fprintf(stderr, "wcomm report: wrote %s\n", output.c_str());
    if (!svg_dir.empty()) {
      std::error_code error;
      fs::create_directories(svg_dir, error);
      if (error) throw std::runtime_error("cannot create '" + svg_dir + "': " + error.message());
      for (const auto& plot : page.plots) write_file(fs::path(svg_dir) / (plot.id + ".svg"), bench::render_svg(plot, true));
      if (!quiet) std::fprintf(stderr, "wcomm report: wrote %zu plots to %s\n", page.plots.size(), svg_dir.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm report: %s\n", e.what());
    return 1;
  }
}

}  // namespace wcomm::tools
