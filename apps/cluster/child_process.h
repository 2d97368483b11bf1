// A child process with its stdin, stdout and stderr on pipes, for the launcher's event loop:
// it keeps reading every child's output (so none blocks on a full pipe) and learns of exits
// without blocking. Each child gets its own process group, so a terminal's Ctrl-C reaches only
// the launcher, which then stops the children in order.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace wcomm::cluster {

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with the given extra environment variables. Throws
  // std::runtime_error for an empty argv or when no process can be made; a program that
  // cannot be executed ends with status 127, saying why on its stderr.
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& environment = {});
  ~ChildProcess();  // kills and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads what is available (non-blocking); returns complete new stderr lines.
  std::vector<std::string> pump();
  // Reaps the child if it has exited; true once finished(): it has exited and its output is
  // drained (or, should something it left behind hold the pipes open, 2 s after its exit).
  bool poll_exit();
  bool finished() const;
  bool exited() const { return exited_; }
  int raw_status() const { return status_; }
  bool succeeded() const { return exited_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }
  int exit_code() const;  // the exit status, or 128 + signal
  std::string describe_exit() const;  // "exit status 1", "killed by signal 9"
  void close_stdin();
  void signal(int sig);
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  // The fds poll() should watch (stdout / stderr still open).
  std::vector<int> open_fds() const;

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_, partial_;
  bool exited_ = false;
  int status_ = 0;
  std::chrono::steady_clock::time_point exited_at_;
};

}  // namespace wcomm::cluster
