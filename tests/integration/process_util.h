// Helpers for tests that run real processes: spawn a child with its output captured, wait for
// it with a deadline (killing it if the test gives up), stop / continue / kill it (a hung or
// crashed peer), free loopback ports, temporary dirs.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "free_port.h"

extern char** environ;

namespace wcomm::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "wcomm-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes text to a file in the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    auto file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

// What a shell command prints on stdout (empty if it cannot run).
inline std::string command_output(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}


// A child process whose stdout and stderr go to files (not pipes: a chatty child can never
// block on a full pipe, and the output survives for the failure message). The destructor
// kills a child that is still running, so a failing test never leaves one behind.
class Process {
 public:
  // Starts argv[0] (a path, or a name looked up in PATH) with argv; output goes to
  // <output_dir>/<name>.{out,err}.
  static Process spawn(const std::vector<std::string>& argv, const std::filesystem::path& output_dir,
                       const std::string& name) {
    Process p;
    p.out_path_ = output_dir / (name + ".out");
    p.err_path_ = output_dir / (name + ".err");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, p.out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, p.err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // The child starts with default signal dispositions and nothing blocked, whatever the
    // test runner did to its own.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawnp(&p.pid_, args[0], &actions, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
    return p;
  }

  Process() = default;
  Process(Process&& other) noexcept { *this = std::move(other); }
  Process& operator=(Process&& other) noexcept {
    if (this != &other) {
      reap();
      pid_ = std::exchange(other.pid_, -1);
      exit_code_ = other.exit_code_;
      out_path_ = std::move(other.out_path_);
      err_path_ = std::move(other.err_path_);
    }
    return *this;
  }
  ~Process() { reap(); }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_code_; }

  // The exit code once the child has exited within timeout (128 + n for a child killed by
  // signal n), else nullopt with the child still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      // A bounded poll of the child's state, not a guess at when something happened.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return exit_code_;
  }

  void signal(int sig) const {
    if (running()) ::kill(pid_, sig);
  }

  // The child's state letter from /proc/PID/stat ('R' running, 'S' sleeping, 'T' stopped,
  // 'Z' exited but not reaped, ...), or 0 when there is no such child any more.
  char state() const {
    if (pid_ <= 0 || exit_code_) return 0;
    const std::string stat = read_text_file("/proc/" + std::to_string(pid_) + "/stat");
    const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
    return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
  }

  // SIGSTOP, then true once the kernel shows the child stopped (false if not within timeout:
  // it exited, say). A stopped child keeps its sockets open but answers nothing: a hung peer.
  bool stop(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    signal(SIGSTOP);
    return wait_for_state([](char s) { return s == 'T' || s == 't'; }, timeout);
  }
  // SIGCONT, then true once the child runs again.
  bool cont(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    signal(SIGCONT);
    return wait_for_state([](char s) { return s != 0 && s != 'T' && s != 't'; }, timeout);
  }
  // SIGKILL, then the exit code once reaped (128 + 9), nullopt if not within timeout. A
  // killed peer's kernel closes its sockets: the other side sees EOF or a reset at once.
  std::optional<int> kill(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    signal(SIGKILL);
    return wait_for(timeout);
  }

  // True once the child's stderr holds `text`, false if it has not within timeout (or the
  // child exited first).
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (err().find(text) == std::string::npos) {
      if (!running() || std::chrono::steady_clock::now() >= deadline) return err().find(text) != std::string::npos;
      wait_for(std::chrono::milliseconds(20));  // also notices an exit
    }
    return true;
  }

  std::string out() const { return read_text_file(out_path_); }
  std::string err() const { return read_text_file(err_path_); }
  // Both streams, labelled, for assertion messages.
  std::string output() const { return "--- stdout ---\n" + out() + "--- stderr ---\n" + err(); }

 private:
  template <class Pred>
  bool wait_for_state(Pred pred, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred(state())) {
      if (!running() || std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a bounded poll of /proc
    }
    return true;
  }

  void reap() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
  }

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path out_path_, err_path_;
};

// The port in a "... listening on HOST:PORT" line (wcomm bench responder's stderr), or 0.
inline int listening_port(const std::string& text) {
  const auto at = text.find("listening on ");
  const auto eol = at == std::string::npos ? std::string::npos : text.find('\n', at);
  if (eol == std::string::npos) return 0;
  const std::string line = text.substr(at, eol - at);
  return std::atoi(line.substr(line.rfind(':') + 1).c_str());
}

struct ProcessResult {
  int exit_code = -1;      // -1 when it timed out (and was killed)
  bool timed_out = false;
  std::string out, err;
};

// Runs argv to completion, killing it after timeout.
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& output_dir,
                                 const std::string& name, std::chrono::milliseconds timeout) {
  Process p = Process::spawn(argv, output_dir, name);
  ProcessResult result;
  if (auto code = p.wait_for(timeout)) {
    result.exit_code = *code;
  } else {
    result.timed_out = true;
    p.signal(SIGKILL);
    p.wait_for(std::chrono::seconds(5));
  }
  result.out = p.out();
  result.err = p.err();
  return result;
}

}  // namespace wcomm::testing
