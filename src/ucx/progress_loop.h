// ProgressLoop: the one thread that drives a UCP worker, for the ucx transport's hub and the
// transfer engine's ucx backend. It progresses while there is work, keeps polling a short
// while after the last event (the next fragment of a transfer usually follows within
// microseconds, and a sleep between fragments costs a wake-up each), then arms the worker and
// sleeps on its event fd beside a wake-up fd: with nothing to do it sleeps until UCX or a
// user (wake) has something, or until the bound its owner asks for (a deadline of its own).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <ucp/api/ucp.h>

#include "ucx/ucp_worker.h"

namespace wcomm::ucp {

class ProgressLoop {
 public:
  // What one round found.
  struct Round {
    bool busy = false;  // progress happened, or requests in flight need polling without fd events
    // With nothing to do, how long to sleep at most (none: until an event or wake()).
    std::chrono::milliseconds sleep_at_most = kUntilWoken;
  };
  static constexpr std::chrono::milliseconds kUntilWoken{-1};

  // round: runs on the loop's thread, again and again: ucp_worker_progress and the owner's own
  // work, under whatever serialises calls on the worker. arm: ucp_worker_arm under that lock.
  ProgressLoop(const UcpWorker& worker, std::string thread_name, std::chrono::microseconds poll_after_work,
               std::function<Round()> round, std::function<ucs_status_t()> arm);
  ~ProgressLoop();  // stop()
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  void start();
  void wake();  // any thread: the next round comes now
  void stop();  // joins the thread (detaches it if called on it)
  bool running() const { return thread_.joinable(); }

 private:
  void run();

  const std::string thread_name_;
  const std::chrono::microseconds poll_after_work_;
  std::function<Round()> round_;
  std::function<ucs_status_t()> arm_;
  int wake_fd_ = -1, epoll_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace wcomm::ucp
