// Command-line parsing shared by the `wcomm` sub-commands.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

namespace wcomm::tools {

// Parses argv into app. nullopt: go on; else the exit code to return: 0 after --help, 2 for
// a bad command line (CLI11 has printed why).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

}  // namespace wcomm::tools
