// `wcomm report` as a user runs it: the reference report to an HTML page and SVG files, and
// the exit codes of a bad command line and of an unreadable report.
#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_util.h"

namespace wcomm::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kReference = WCOMM_TEST_DATA "/reference-reports/v0.1-initiator-loopback.json";

TEST(ReportCli, WritesThePageAndOneSvgPerPlot) {
  TempDir dir;
  const std::string html = (dir.path() / "run.html").string();
  const std::string svgs = (dir.path() / "plots").string();
  const ProcessResult result =
      run_process({WCOMM_CLI, "report", kReference, "-o", html, "--svg-dir", svgs}, dir.path(), "report", 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string page = read_text_file(html);
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
  EXPECT_TRUE(page.ends_with("</html>\n"));
  EXPECT_EQ(page.find("http"), std::string::npos);
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(svgs)) {
    EXPECT_EQ(entry.path().extension(), ".svg");
    const std::string svg = read_text_file(entry.path());
    EXPECT_TRUE(svg.starts_with("<?xml")) << entry.path();
    // The same plot is inline in the page.
    const std::string id = "<svg id=\"plot-" + entry.path().stem().string() + "\"";
    EXPECT_NE(page.find(id), std::string::npos) << id;
    ++files;
  }
  for (const char* name : {"rtt-by-size.svg", "goodput-by-size.svg", "load-rtt-vs-delivered.svg",
                           "initiator-interface-rate.svg", "responder-softirq-rate.svg"}) {
    EXPECT_TRUE(fs::exists(fs::path(svgs) / name)) << name;
  }
  EXPECT_GE(files, 8u);
  EXPECT_FALSE(fs::exists(html + ".tmp"));
}

TEST(ReportCli, DefaultOutputSitsBesideTheReport) {
  TempDir dir;
  const std::string copy = dir.write("run.json", read_text_file(kReference));
  const ProcessResult result = run_process({WCOMM_CLI, "report", copy, "--quiet"}, dir.path(), "report", 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(fs::exists(dir.path() / "run.html"));
  EXPECT_EQ(result.err, "");
}

// A report V0.1 wrote with four load scenarios (V0.1's keys only; tests/data/README.md): the
// page draws all four, in the table and in both load plots.
TEST(ReportCli, DrawsTheLoadScenariosOfAV01Report) {
  TempDir dir;
  const std::string html = (dir.path() / "v01.html").string();
  const std::string svgs = (dir.path() / "plots").string();
  const ProcessResult result =
      run_process({WCOMM_CLI, "report", WCOMM_SOURCE_DIR "/tests/data/v01-report-four-load-scenarios.json", "-o", html,
                   "--svg-dir", svgs, "--quiet"},
                  dir.path(), "report", 60s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto count = [](const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  const std::string summary = read_text_file(fs::path(svgs) / "load-rtt-vs-delivered.svg");
  EXPECT_EQ(summary.find("no latency-under-load scenarios"), std::string::npos);
  EXPECT_EQ(count(summary, "<circle class=\"point\""), 8u);  // p50 and p99 of each scenario
  EXPECT_EQ(count(read_text_file(fs::path(svgs) / "load-rtt-samples.svg"), "class=\"box\""), 4u);
  const std::string page = read_text_file(html);
  const std::string table = page.substr(page.find("id=\"load\""));
  EXPECT_EQ(count(table, "<tr><th>upload</th>") + count(table, "<tr><th>download</th>"), 4u);
}

TEST(ReportCli, ExitCodes) {
  TempDir dir;
  EXPECT_EQ(run_process({WCOMM_CLI, "report"}, dir.path(), "no-args", 30s).exit_code, 2);
  const ProcessResult missing =
      run_process({WCOMM_CLI, "report", (dir.path() / "absent.json").string()}, dir.path(), "missing", 30s);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
  const std::string garbage = dir.write("garbage.json", "{not json");
  const ProcessResult bad = run_process({WCOMM_CLI, "report", garbage}, dir.path(), "garbage", 30s);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("not a JSON benchmark report"), std::string::npos) << bad.err;
  EXPECT_EQ(run_process({WCOMM_CLI, "report", garbage, "-o", garbage}, dir.path(), "same", 30s).exit_code, 2);
}

}  // namespace
}  // namespace wcomm::testing
