// Future<T>: the one handle every asynchronous wcomm operation returns. Wait on it (with or
// without a timeout), give it a callback, or cancel the operation through it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "wcomm/deadline.h"
#include "wcomm/errors.h"

namespace wcomm {

// Runs a function later on an executor (the Comm's loop thread).
using Poster = std::function<void(std::function<void()>)>;
// One Poster shared by many promises: each holds a reference, not a copy (a std::function
// copy allocates; a Comm makes one per operation).
using SharedPoster = std::shared_ptr<const Poster>;

namespace detail {
// The operation behind a Future and what a helping thread sleeps on: implemented inside
// wcomm (src/core/operation.h); a Future only holds them.
class Operation;
class Waker;
struct PromiseAccess;
void cancel(Operation& operation);
void help(Operation& operation, std::chrono::steady_clock::time_point deadline);
void callback_set(Operation& operation);
void wake(Waker& waker);

template <class T>
struct FutureState {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> ready{false};
  std::optional<Result<T>> result;
  std::function<void(Result<T>)> callback;
  std::weak_ptr<Operation> operation;  // set by the owner; dropped once the result is set
  SharedPoster post;                   // where a late callback runs (never inline in then())
  std::vector<Waker*> wakers;          // helping threads sleeping for the result (under mu)
};
}  // namespace detail

template <class T>
class Promise;

// Completion contract: the result is set exactly once; a callback runs exactly once, on the
// Comm's loop thread, never inline from the call that started the operation or from then(),
// and never while a wcomm lock is held.
template <class T>
class Future {
 public:
  Future() = default;

  bool valid() const { return state_ != nullptr || known_; }
  bool ready() const { return known_ || state_->ready.load(std::memory_order_acquire); }

  // Blocks until the result is there. It never spins waiting for another thread (on 2-core
  // boards such a waiter takes the core the loop thread needs); the operation's help() may
  // do the work on this thread first (a recv reads, and briefly busy-polls, its own socket).
  Result<T>& wait() {
    if (known_) return *known_;
    help(std::chrono::steady_clock::time_point::max());
    // Set before ready (release), never changed after: no lock needed to read it then.
    if (ready()) return *state_->result;
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->result.has_value(); });
    return *state_->result;
  }

  // The result if it is there within timeout, else nullopt (the operation goes on).
  template <class Rep, class Period>
  Result<T>* wait_for(std::chrono::duration<Rep, Period> timeout) {
    if (known_) return &*known_;
    // (Saturating: a timeout too long for the clock has no end, and never overflows it.)
    const auto deadline = deadline_after(timeout);
    help(deadline);
    std::unique_lock lock(state_->mu);
    const auto done = [&] { return state_->result.has_value(); };
    if (deadline == SteadyClock::time_point::max()) state_->cv.wait(lock, done);
    else if (!state_->cv.wait_until(lock, deadline, done)) return nullptr;
    return &*state_->result;
  }

  // Blocks, then returns the value or throws the typed error (e.g. OperationTimeoutError).
  T get() { return std::move(wait()).value(); }

  // Registers the completion callback (at most one).
  void then(std::function<void(Result<T>)> callback) {
    if (known_) return run_later(std::move(callback), *known_, known_post_);
    std::unique_lock lock(state_->mu);
    if (!state_->result) {
      state_->callback = std::move(callback);
      std::shared_ptr<detail::Operation> operation = state_->operation.lock();
      lock.unlock();
      if (operation) detail::callback_set(*operation);
      return;
    }
    Result<T> result = *state_->result;
    SharedPoster post = state_->post;
    lock.unlock();
    run_later(std::move(callback), std::move(result), post);
  }

  // Asks for the operation to be cancelled. It then fails with CancelledError, unless it had
  // already completed. Cancelling a send that is being written aborts that connection.
  void cancel() {
    if (known_) return;
    std::shared_ptr<detail::Operation> operation;
    {
      std::lock_guard lock(state_->mu);
      if (state_->result) return;
      operation = state_->operation.lock();
    }
    if (operation) detail::cancel(*operation);
  }

 private:
  void help(std::chrono::steady_clock::time_point deadline) {
    if (ready()) return;
    std::shared_ptr<detail::Operation> operation;
    {
      std::lock_guard lock(state_->mu);
      operation = state_->operation.lock();
    }
    if (operation) detail::help(*operation, deadline);
  }

  static void run_later(std::function<void(Result<T>)> callback, Result<T> result, const SharedPoster& post) {
    auto run = [cb = std::move(callback), r = std::move(result)]() mutable { cb(std::move(r)); };
    if (post && *post) (*post)(std::move(run)); else std::thread(std::move(run)).detach();
  }

  friend class Promise<T>;
  friend struct detail::PromiseAccess;
  template <class U>
  friend Future<U> ready_future(Result<U> result, SharedPoster post);
  explicit Future(std::shared_ptr<detail::FutureState<T>> s) : state_(std::move(s)) {}
  Future(Result<T> known, SharedPoster post) : known_(std::move(known)), known_post_(std::move(post)) {}
  std::shared_ptr<detail::FutureState<T>> state_;
  // A result known when the Future was made (ready_future): held here, with no shared state,
  // no lock and no allocation; a copy of the Future copies it.
  std::optional<Result<T>> known_;
  SharedPoster known_post_;  // where then() runs its callback
};

// The producing side of a Future (used inside wcomm and by services built on it).
template <class T>
class Promise {
 public:
  explicit Promise(Poster post = {}) : state_(std::make_shared<detail::FutureState<T>>()) {
    if (post) state_->post = std::make_shared<const Poster>(std::move(post));
  }
  explicit Promise(SharedPoster post) : state_(std::make_shared<detail::FutureState<T>>()) {
    state_->post = std::move(post);
  }
  // With its operation from the start (what set_operation does, without the lock: no other
  // thread can see a promise being made).
  Promise(SharedPoster post, std::weak_ptr<detail::Operation> operation) : Promise(std::move(post)) {
    state_->operation = std::move(operation);
  }
  Future<T> future() const { return Future<T>(state_); }
  // The operation that cancel() and waiting threads turn to (wcomm's own operations).
  void set_operation(std::weak_ptr<detail::Operation> operation) {
    std::lock_guard lock(state_->mu);
    state_->operation = std::move(operation);
  }
  bool done() const { return state_->ready.load(std::memory_order_acquire); }

  // Sets the result (first call wins) and runs the callback, if any, on this thread with no
  // lock held. Returns false if a result was already set.
  bool complete(Result<T> result) {
    auto callback = set_result(std::move(result));
    if (!callback) return false;
    if (*callback) (*callback)(*state_->result);
    return true;
  }
  // Like complete, but a callback is handed to `defer` to run elsewhere (for results set on
  // a thread where callbacks must not run).
  bool complete_deferring_callback(Result<T> result, const std::function<void(std::function<void()>)>& defer) {
    auto callback = set_result(std::move(result));
    if (!callback) return false;
    if (*callback) defer([state = state_, cb = std::move(*callback)] { cb(*state->result); });
    return true;
  }

 private:
  friend struct detail::PromiseAccess;
  // Sets the result and wakes waiters; returns the callback to run (nullopt: already set).
  std::optional<std::function<void(Result<T>)>> set_result(Result<T>&& result) {
    std::function<void(Result<T>)> callback;
    {
      std::lock_guard lock(state_->mu);
      if (state_->result) return std::nullopt;
      state_->result.emplace(std::move(result));
      state_->ready.store(true, std::memory_order_release);
      callback = std::move(state_->callback);
      state_->operation.reset();
      for (detail::Waker* waker : state_->wakers) detail::wake(*waker);  // under mu: see detail::PromiseAccess
    }
    state_->cv.notify_all();
    return callback;
  }

  std::shared_ptr<detail::FutureState<T>> state_;
};

// A Future that is already complete (for results known at the call).
template <class T>
Future<T> ready_future(Result<T> result, SharedPoster post) {
  return Future<T>(std::move(result), std::move(post));
}
template <class T>
Future<T> ready_future(Result<T> result, Poster post = {}) {
  return ready_future(std::move(result), post ? std::make_shared<const Poster>(std::move(post)) : SharedPoster{});
}

}  // namespace wcomm
