#include "output.h"

#include <cstdarg>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

namespace wifi_cell {
namespace {

struct Writer {
  std::mutex mu;
  std::condition_variable ready;
  std::deque<std::string> lines;
  bool done = false;
  std::thread thread{[this] { run(); }};

  void run() {
    std::unique_lock lock(mu);
    for (;;) {
      ready.wait(lock, [this] { return done || !lines.empty(); });
      std::deque<std::string> batch;
      batch.swap(lines);
      const bool last = done;
      lock.unlock();
      for (const auto& line : batch) std::fprintf(stdout, "%s\n", line.c_str());
      std::fflush(stdout);
      lock.lock();
      if (last && lines.empty()) return;
    }
  }
};

Writer& writer() {
  static Writer w;
  return w;
}

}  // namespace

std::string format(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  std::string out(std::vsnprintf(nullptr, 0, fmt, args), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, again);
  va_end(again);
  va_end(args);
  return out;
}

void emit(std::string line) {
  Writer& w = writer();
  {
    std::lock_guard lock(w.mu);
    w.lines.push_back(std::move(line));
  }
  w.ready.notify_one();
}

void finish_output() {
  Writer& w = writer();
  {
    std::lock_guard lock(w.mu);
    w.done = true;
  }
  w.ready.notify_one();
  if (w.thread.joinable()) w.thread.join();
}

}  // namespace wifi_cell
