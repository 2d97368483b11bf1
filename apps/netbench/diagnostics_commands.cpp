// External commands of the diagnostics: PATH lookup, posix_spawn with pipes, a deadline, and
// V0.1's command-result shape.
#include "netbench/diagnostics_commands.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "netbench/diagnostics_text.h"

extern char** environ;

namespace wcomm::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Collects one stream up to a cap; what is beyond it is read and dropped.
struct Capture {
  int fd = -1;
  std::string data;
  bool truncated = false;
};

void read_available(Capture& capture, std::size_t cap) {
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(capture.fd, buffer, sizeof buffer);
    if (n > 0) {
      const std::size_t room = cap > capture.data.size() ? cap - capture.data.size() : 0;
      const std::size_t keep = std::min(room, static_cast<std::size_t>(n));
      capture.data.append(buffer, keep);
      if (keep < static_cast<std::size_t>(n)) capture.truncated = true;
      continue;  // the pipe is non-blocking: keep reading until it says EAGAIN
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    ::close(capture.fd);  // end of stream (or an error we cannot do better with)
    capture.fd = -1;
    return;
  }
}

// The child's environment: ours with the locale forced to C, so ping, lscpu and friends print
// the English labels the parsers (and V0.1's readers) expect.
std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("LC_ALL=") || entry.starts_with("LANG=") || entry.starts_with("LANGUAGE=")) continue;
    env.emplace_back(entry);
  }
  env.emplace_back("LC_ALL=C");
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

nlohmann::json result(const std::vector<std::string>& argv, bool available, nlohmann::json returncode,
                      const std::string& stdout_text, const std::string& stderr_text) {
  return {
      {"available", available},
      {"command", argv},
      {"returncode", std::move(returncode)},
      {"stderr", strip_whitespace(valid_utf8(stderr_text))},
      {"stdout", strip_whitespace(valid_utf8(stdout_text))},
  };
}

}  // namespace

std::optional<std::string> find_executable(const std::string& program, const std::optional<std::string>& search_path) {
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string::npos) {
    if (is_executable_file(program)) return program;
    return std::nullopt;
  }
  std::string path;
  if (search_path) {
    path = *search_path;
  } else if (const char* env_path = std::getenv("PATH")) {
    path = env_path;
  } else {
    path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

nlohmann::json run_command(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) return result(argv, false, nullptr, "", "no command given");
  const std::optional<std::string> program = find_executable(argv[0], options.search_path);
  if (!program) return result(argv, false, nullptr, "", argv[0] + " is not installed");

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return result(argv, true, nullptr, "", std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return result(argv, true, nullptr, "", std::string("cannot create a pipe: ") + std::strerror(error));
  }

  // posix_spawn rather than fork: the benchmark process is multi-threaded and may hold
  // hundreds of MiB, and glibc's posix_spawn uses CLONE_VM, so spawning neither copies page
  // tables (the periodic sampler must stay cheap) nor runs non-async-signal-safe code in a child.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Descriptors other threads opened without O_CLOEXEC (sockets of the run) stay out of the tool.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  sigaddset(&default_signals, SIGINT);
  sigaddset(&default_signals, SIGTERM);
  posix_spawnattr_setsigmask(&attributes, &no_signals);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);
  // Its own process group, so a timeout kills whatever the tool started too.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment();
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_env = c_strings(env);
  pid_t pid = -1;
  const int spawn_error = ::posix_spawn(&pid, program->c_str(), &actions, &attributes, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawn_error != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return result(argv, true, nullptr, "", "cannot run " + argv[0] + ": " + std::strerror(spawn_error));
  }

  Capture out;
  out.fd = out_pipe[0];
  Capture err;
  err.fd = err_pipe[0];
  ::fcntl(out.fd, F_SETFL, ::fcntl(out.fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(err.fd, F_SETFL, ::fcntl(err.fd, F_GETFL) | O_NONBLOCK);
  const auto deadline = SteadyClock::now() + options.timeout;
  bool timed_out = false;
  while (out.fd >= 0 || err.fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t count = 0;
    Capture* owners[2];
    for (Capture* c : {&out, &err}) {
      if (c->fd < 0) continue;
      fds[count] = {c->fd, POLLIN, 0};
      owners[count++] = c;
    }
    const int ready = ::poll(fds, count, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      timed_out = true;  // cannot watch the child any more: stop it rather than wait blind
      break;
    }
    for (nfds_t i = 0; i < count && ready > 0; ++i) {
      if (fds[i].revents != 0) read_available(*owners[i], options.max_output_bytes);
    }
  }
  if (out.fd >= 0) ::close(out.fd);
  if (err.fd >= 0) ::close(err.fd);

  // Both streams are closed, but a tool may close them and keep running: the deadline holds
  // for its exit too.
  int status = 0;
  pid_t waited = 0;
  auto pause = std::chrono::microseconds(200);
  while (!timed_out) {
    waited = ::waitpid(pid, &status, WNOHANG);
    if (waited != 0 && !(waited < 0 && errno == EINTR)) break;
    if (SteadyClock::now() >= deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    do {
      waited = ::waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
  }

  std::string stderr_text = err.data;
  nlohmann::json returncode = nullptr;
  if (timed_out) {
    const double seconds = std::chrono::duration<double>(options.timeout).count();
    char message[96];
    std::snprintf(message, sizeof message, "timed out after %g s", seconds);
    stderr_text = strip_whitespace(stderr_text);
    stderr_text += stderr_text.empty() ? message : std::string("\n") + message;
  } else if (waited == pid && WIFEXITED(status)) {
    returncode = WEXITSTATUS(status);
  } else if (waited == pid && WIFSIGNALED(status)) {
    returncode = -WTERMSIG(status);
  }
  if (out.truncated) out.data += "\n[output truncated]";
  if (err.truncated) stderr_text += "\n[output truncated]";
  return result(argv, true, std::move(returncode), out.data, stderr_text);
}

}  // namespace wcomm::bench
