// What cluster workers and ranks say about themselves (the line that says they listen, their
// exit codes), and why a launch failed, read from what its processes wrote on stderr.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace wcomm::cluster {

// Printed on stderr by a worker or rank once its ranks listen ("... listening (pid 123)").
inline constexpr const char* kListeningMarker = "listening (pid ";
// Exit codes: 0 done, 1 failed here, 3 stopped because another rank failed (a lost peer), 5
// stopped by its launcher (its input closed).
inline constexpr int kExitPeerFailed = 3;
inline constexpr int kExitStoppedByLauncher = 5;

struct SessionEnd {
  std::vector<std::string> stderr_lines;
  std::string exit_text;   // "exit status 1", "killed by signal 9"
  int exit_code = 0;       // the status, or 128 + signal
  bool signaled = false;   // the local process (ssh, scp) itself died of a signal
  std::string pid;         // the remote worker's, when it said it listened
  bool is_copy = false;    // an scp of the topology, not a worker's session
};

// Why an SSH session (or copy) failed: the worker's own error line, else ssh's or scp's words,
// else its last line, with how it ended; ssh's silent 255 is said to be a killed worker or a
// dropped connection.
std::string session_failure_reason(const SessionEnd& end);

struct RankFailure {
  std::string node;
  std::string reason;  // "rank 2: Killed"
};

// The failed rank in srun's or mpirun's merged stderr: a rank's own error line first, then the
// launcher's word on a rank that died (mpirun: "... process rank 2 with PID 7 on node n1
// exited on signal 9 (Killed)", srun: "srun: error: n1: task 2: Killed"), then a rank that
// stopped because a peer failed. nullopt when no line names one.
std::optional<RankFailure> batch_rank_failure(const std::vector<std::string>& lines);

}  // namespace wcomm::cluster
