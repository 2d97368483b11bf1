// ProgressLoop: progress, poll a little after work, arm, sleep (progress_loop.h).
#include "ucx/progress_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace wcomm::ucp {

ProgressLoop::ProgressLoop(const UcpWorker& worker, std::string thread_name, std::chrono::microseconds poll_after_work,
                           std::function<Round()> round, std::function<ucs_status_t()> arm)
    : thread_name_(std::move(thread_name)), poll_after_work_(poll_after_work), round_(std::move(round)),
      arm_(std::move(arm)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, worker.event_fd(), &ev);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

ProgressLoop::~ProgressLoop() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void ProgressLoop::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), thread_name_.substr(0, 15).c_str());
    run();
  });
}

void ProgressLoop::wake() {
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void ProgressLoop::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  wake();
  if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
  else thread_.join();
}

void ProgressLoop::run() {
  auto last_work = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    const Round round = round_();
    const auto now = std::chrono::steady_clock::now();
    if (round.busy) {
      last_work = now;
      continue;
    }
    if (now - last_work < poll_after_work_) continue;
    if (arm_() == UCS_ERR_BUSY) continue;  // events came in meanwhile: progress again
    epoll_event events[2];
    if (::epoll_wait(epoll_fd_, events, 2, static_cast<int>(round.sleep_at_most.count())) > 0) {
      std::uint64_t drained;
      (void)!::read(wake_fd_, &drained, sizeof drained);
    }
  }
}

}  // namespace wcomm::ucp
