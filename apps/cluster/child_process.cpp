// ChildProcess: fork / exec with three pipes, non-blocking reads, waitpid(WNOHANG).
#include "cluster/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace wcomm::cluster {
namespace {

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
}

// Reads what is there without blocking; closes fd (and sets it to -1) at end of file.
void drain(int& fd, std::string& into) {
  if (fd < 0) return;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    ::close(fd);
    fd = -1;
    return;
  }
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& environment) {
  if (argv.empty()) throw std::runtime_error("ChildProcess: no program to run");
  int in[2], out[2], err[2];
  make_pipe(in);
  make_pipe(out);
  make_pipe(err);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (!environment.count(name)) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : environment) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  in_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  ::fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
  for (int fd : {in_, out_fd_, err_fd_})
    if (fd >= 0) ::close(fd);
}

std::vector<std::string> ChildProcess::pump() {
  drain(out_fd_, out_);
  std::size_t before = err_.size();
  drain(err_fd_, err_);
  partial_ += err_.substr(before);
  std::vector<std::string> lines;
  std::size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos) {
    lines.push_back(partial_.substr(0, nl));
    partial_.erase(0, nl + 1);
  }
  if (err_fd_ < 0 && !partial_.empty()) {
    lines.push_back(partial_);
    partial_.clear();
  }
  return lines;
}

bool ChildProcess::poll_exit() {
  if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) {
    exited_ = true;
    exited_at_ = std::chrono::steady_clock::now();
  }
  return finished();
}

bool ChildProcess::finished() const {
  if (!exited_) return false;
  return (out_fd_ < 0 && err_fd_ < 0) || std::chrono::steady_clock::now() - exited_at_ > std::chrono::seconds(2);
}

int ChildProcess::exit_code() const {
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

std::string ChildProcess::describe_exit() const {
  if (!exited_) return "still running";
  if (WIFSIGNALED(status_)) return "killed by signal " + std::to_string(WTERMSIG(status_));
  return "exit status " + std::to_string(WEXITSTATUS(status_));
}

void ChildProcess::close_stdin() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

void ChildProcess::signal(int sig) {
  if (!exited_ && pid_ > 0) ::kill(-pid_, sig);  // its process group: srun / mpirun / ssh and helpers
}

std::vector<int> ChildProcess::open_fds() const {
  std::vector<int> fds;
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) fds.push_back(fd);
  return fds;
}

}  // namespace wcomm::cluster
