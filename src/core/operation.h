// What a Future asks of the operation behind it (cancel, help, callback_set), the waker a
// helping thread sleeps on, and the Promise hooks of the receive fast path. Internal: users
// see only Future and Promise (wcomm/future.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "wcomm/future.h"

namespace wcomm::detail {

// The operation behind a Future, as its owner implements it. A Future holds it weakly, so a
// finished operation can go away.
class Operation {
 public:
  virtual ~Operation() = default;
  // Asks for the operation to be cancelled (from any thread; it completes later).
  virtual void cancel() = 0;
  // Called by a thread about to block in wait() or wait_for(): it may complete the operation
  // on that thread (a recv reads its own message). Returns when the result is there, at the
  // deadline, or when it cannot help; the thread then sleeps until the result is set.
  virtual void help(std::chrono::steady_clock::time_point /*deadline*/) {}
  // Called when then() registered a callback on the unfinished operation: no thread will wait
  // for it, so the owner must see it through on its own (a recv makes sure the loop reads).
  virtual void callback_set() {}
};

// Something a sleeping thread is woken through (an eventfd the transport polls beside a
// connection). wake() is called with the promise's mutex held, see PromiseAccess.
class Waker {
 public:
  virtual ~Waker() = default;
  virtual void wake() = 0;
};

// The wake handshake between a completer and helping threads, under the promise's mutex:
// set_waker registers only if the result is not there yet, completion wakes every registered
// waker before it lets go of the mutex, and clear_waker waits out such a completion. So a
// thread that registered is always woken, and never after it has cleared (its waker may be
// gone by then). Several threads may wait on one promise (a recv among several waits of
// Comm::wait_any): each registers and clears its own.
struct PromiseAccess {
  template <class T>
  static bool set_waker(const Promise<T>& promise, Waker* waker) {
    std::lock_guard lock(promise.state_->mu);
    if (promise.state_->result) return false;
    promise.state_->wakers.push_back(waker);
    return true;
  }
  template <class T>
  static void clear_waker(const Promise<T>& promise, Waker* waker) {
    std::lock_guard lock(promise.state_->mu);
    auto& wakers = promise.state_->wakers;
    if (auto it = std::find(wakers.begin(), wakers.end(), waker); it != wakers.end()) wakers.erase(it);
  }
  // The operation behind future; null once its result is set.
  template <class T>
  static std::shared_ptr<Operation> operation(const Future<T>& future) {
    if (future.known_) return nullptr;
    std::lock_guard lock(future.state_->mu);
    return future.state_->operation.lock();
  }
};

}  // namespace wcomm::detail
