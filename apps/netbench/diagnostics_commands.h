// Running the external tools of the diagnostics (ip, tc, ss, iw, ethtool, ping, ...) with a
// timeout, as V0.1's command results: {available, command, returncode, stderr, stdout}.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

struct CommandOptions {
  // The child is killed (its whole process group) when it runs longer than this.
  std::chrono::milliseconds timeout{5000};
  // Directories to look the program up in, ':'-separated as $PATH; nullopt means $PATH.
  // Tests pass a PATH without a tool to see the "not installed" result.
  std::optional<std::string> search_path;
  // Output kept per stream; the rest is read and dropped so the child never blocks on a
  // full pipe.
  std::size_t max_output_bytes = 4u << 20;
};

// The full path of `program` (a bare name) found in `search_path` (nullopt: $PATH), or
// nullopt when no executable file of that name is there. A name with a '/' is checked as is.
std::optional<std::string> find_executable(const std::string& program,
                                           const std::optional<std::string>& search_path = std::nullopt);

// Runs argv (argv[0] looked up as find_executable does) with stdin from /dev/null, LC_ALL=C
// (so the parsers see the untranslated output) and returns V0.1's command result:
//   available  false when argv[0] is not installed (returncode null, stderr
//              "<argv[0]> is not installed", stdout "")
//   command    argv as given
//   returncode the exit status; minus the signal number when a signal ended it (Python's
//              subprocess convention); null when it timed out or could not be started
//   stdout, stderr  the output with leading and trailing whitespace removed, as V0.1 kept it;
//              on a timeout stderr ends with "timed out after N s"
// Never throws for a failing or missing tool: a missing tool is an observation, not an error.
nlohmann::json run_command(const std::vector<std::string>& argv, const CommandOptions& options = {});

}  // namespace wcomm::bench
