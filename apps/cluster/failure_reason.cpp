// session_failure_reason and batch_rank_failure: the failed node and why, from stderr lines.
#include "cluster/failure_reason.h"

#include <cctype>
#include <initializer_list>
#include <regex>

namespace wcomm::cluster {

std::string session_failure_reason(const SessionEnd& end) {
  const auto& lines = end.stderr_lines;
  std::string reason;
  auto last_with = [&](std::initializer_list<const char*> needles) {
    for (auto it = lines.rbegin(); it != lines.rend() && reason.empty(); ++it)
      for (const char* needle : needles)
        if (it->find(needle) != std::string::npos) {
          reason = *it;
          break;
        }
  };
  last_with({": error: "});
  last_with({"ssh: "});
  last_with({"scp: ", "Permission denied"});
  for (auto it = lines.rbegin(); it != lines.rend() && reason.empty(); ++it)
    if (!it->empty() && it->find(kListeningMarker) == std::string::npos && it->find("multirank: rank") == std::string::npos)
      reason = *it;
  while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back()))) reason.pop_back();
  std::string how = end.exit_text;
  if (end.exit_code > 128 && end.exit_code < 255 && !end.signaled)
    how += " (killed by signal " + std::to_string(end.exit_code - 128) + ")";
  // ssh says 255 without a word when the remote command died of a signal (sshd reports the
  // signal, not a status) or the connection dropped.
  if (reason.empty() && end.exit_code == 255 && !end.is_copy)
    return "the SSH session ended without an exit status (ssh exit status 255): the worker" +
           (end.pid.empty() ? std::string() : " (pid " + end.pid + ")") + " was killed by a signal, or the connection dropped";
  return reason.empty() ? "the worker ended: " + how : reason + " [" + how + "]";
}

std::optional<RankFailure> batch_rank_failure(const std::vector<std::string>& lines) {
  static const std::regex kRankError(R"(cluster rank (\d+) on (\S+): error: (.*))");
  static const std::regex kMpirunDied(R"(process rank (\d+) with PID \d+ on node (\S+) (exited on signal .*))");
  static const std::regex kSrunDied(R"(srun: error: (\S+): tasks? ([\d,-]+): (.*))");
  static const std::regex kRankStopped(R"(cluster rank (\d+) on (\S+): stopped, a peer failed: (.*))");
  // srun also lists the ranks that exited 3 (they stopped because a peer failed): those last.
  auto peer_stop = [](const std::string& line) {
    return line.find("exit code " + std::to_string(kExitPeerFailed)) != std::string::npos;
  };
  const std::vector<std::pair<const std::regex*, bool>> searches = {
      {&kRankError, false}, {&kMpirunDied, false}, {&kSrunDied, true}, {&kRankStopped, false}, {&kSrunDied, false}};
  for (const auto& [pattern, skip_peer_stops] : searches)
    for (const auto& line : lines) {
      std::smatch m;
      if (!std::regex_search(line, m, *pattern) || (skip_peer_stops && peer_stop(line))) continue;
      const bool srun = pattern == &kSrunDied;
      return RankFailure{.node = srun ? m[1].str() : m[2].str(),
                         .reason = "rank " + (srun ? m[2].str() : m[1].str()) + ": " + m[3].str()};
    }
  return std::nullopt;
}

}  // namespace wcomm::cluster
