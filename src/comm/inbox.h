// A peer's inbox: the receive side's state, shared by the loop and callers' threads under one
// lock of its own. Per tag, in arrival order, what arrived (messages, and the errors of frames
// this side refused) and the recvs waiting (one FIFO of receive operations); the inbound
// bound and the connections paused for it; which connections' frames are admitted
// ("supersede"); the retry keys delivered. Its state is reached only through Inbox::Locked, a
// view that holds the lock. Nothing here completes a promise or runs user code: PeerState
// decides under the lock and completes after it let go. (A recv whose sink is a slot on its
// reading thread's stack, RecvSlot, is filled here: that runs nothing, and must be done
// before the lock is let go, after which the thread may return.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "comm/deadlines.h"
#include "transport/thread_waker.h"
#include "wcomm/comm.h"

namespace wcomm {

class Connection;
struct RecvWaiter;

// The sink of a recv whose own thread reads for it (Comm::recv_for): a slot on that thread's
// stack instead of a promise. Filled once, under the inbox's lock; the thread is woken when
// the loop fills it with an error (a message is read by the thread itself, or by the loop
// while that thread waits out its reading: nobody sleeps on the waker then).
struct RecvSlot {
  transport::ThreadWaker* waker = nullptr;
  std::optional<Result<Received>> result;
  std::atomic<bool> filled{false};
};

class Inbox {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Inbox(const CommConfig& limits) : limits_(limits) {}

  // The inbox under its lock (Inbox::lock()). RecvWaiter::done and ::claimed are guarded by
  // it too.
  class Locked {
   public:
    // What a recv on tag that comes now takes: a message or a refused frame's error queued
    // on it, an error nothing was told of yet, or the Comm's end; none: it must wait.
    std::optional<Result<Received>> take(std::uint32_t tag);
    bool waiting(std::uint32_t tag) const;  // a recv waits on tag
    bool waiting_beyond(std::size_t beyond) const;  // more than `beyond` recvs wait
    std::size_t waiting_count() const;              // how many recvs wait
    // Parks a recv, last on its tag. True: it has the earliest deadline of all, earlier than
    // the peer's timer is armed for, so the loop must arm it again (PeerState::arm_deadline_timer).
    [[nodiscard]] bool park(std::shared_ptr<RecvWaiter> waiter);
    // Puts waiter in parked's place (parked: a recv with a slot, still waiting), as park does.
    [[nodiscard]] bool replace(const std::shared_ptr<RecvWaiter>& parked, std::shared_ptr<RecvWaiter> waiter);
    // Takes a waiter out (cancel, timeout): false if it is done, or a frame is being read
    // into it (it completes with that frame).
    bool unpark(const std::shared_ptr<RecvWaiter>& waiter);
    // A waiter completed by its own frame (recv_into): out of its queue, done.
    void finish(const std::shared_ptr<RecvWaiter>& waiter);
    // The recvs whose deadline has come, done (to fail with a timeout), and the next deadline
    // the peer's timer is to be armed for (max: none). A recv a frame is being read into has
    // no deadline any more: the frame completes it.
    std::vector<std::shared_ptr<RecvWaiter>> take_due(Clock::time_point now, Clock::time_point& next);
    // The recv_into a frame on tag is read into, if the next waiter is one: claimed.
    std::shared_ptr<RecvWaiter> claim_into(std::uint32_t tag);
    // A claimed waiter whose frame was refused before it was read waits again, first in line,
    // with its deadline kept again: true as park.
    [[nodiscard]] bool unclaim(RecvWaiter& waiter);
    // Hands a message to the next recv on tag, done: one with a slot is filled here; one with
    // a promise is returned, to be completed with the message (left in `message`) once the
    // lock is let go. None waits: the message is queued, counted against the inbound bound.
    std::shared_ptr<RecvWaiter> hand_over(std::uint32_t tag, Received& message);
    // A refused frame's error to the recv its frame would have reached, the first waiting on
    // tag (a slot is filled here; a promise's waiter is returned, to complete), else queued
    // in the frame's place.
    std::shared_ptr<RecvWaiter> route_refusal(std::uint32_t tag, const Error& error);
    // A broken stream's error nobody was waiting for: kept for the next recv that finds
    // nothing (false: an earlier one is still kept; the caller counts and logs it).
    bool keep_unreported(const Error& error);
    // Every recv waiting, done, to fail with `error`: those with a slot are filled here, the
    // others returned. told: whether there was any.
    std::vector<std::shared_ptr<RecvWaiter>> take_waiters(const Error& error, bool* told = nullptr);
    void close(const Error& why) { inbox_.closed_ = why; }  // recvs that come now fail with why

    // Connections whose frames are admitted (see Inbox::reading_).
    void add_reading(Connection* connection) { inbox_.reading_.push_back(connection); }
    void remove(const std::shared_ptr<Connection>& connection);
    // Whether a frame with these flags from `from` is delivered. A frame flagged as the
    // first on a new connection supersedes the others (see reading_); those to end are added
    // to `to_end`, to be ended once the lock is let go.
    bool admit(Connection& from, std::uint8_t flags, std::vector<Connection*>& to_end);
    // Whether a message with this retry key was delivered already (else it is remembered).
    bool seen_retry_key(std::uint64_t key);

    // The connection a blocked caller may read itself: the only one, else none.
    const std::shared_ptr<Connection>& caller_read() const { return inbox_.caller_read_; }
    void set_caller_read(std::shared_ptr<Connection> connection) { inbox_.caller_read_ = std::move(connection); }

   private:
    friend class Inbox;
    explicit Locked(Inbox& inbox) : inbox_(inbox), lock_(inbox.mutex_) {}
    Inbox& inbox_;
    std::unique_lock<std::mutex> lock_;
  };
  Locked lock() { return Locked(*this); }

  // The inbound bound (no lock for the counters a frame charges and releases): a connection
  // pauses when the application's unreceived messages, with the frames being read, pass
  // CommConfig's bounds, and reads on once they drain.
  // True: paused. look_again: room came meanwhile (a release of partial bytes that came
  // between the look and the pause saw nothing paused): resume the paused ones.
  bool pause_if_full(const std::shared_ptr<Connection>& connection, bool& look_again);
  void charge_partial(std::uint64_t bytes) { partial_bytes_.fetch_add(bytes); }
  void release_partial(std::uint64_t bytes) { partial_bytes_.fetch_sub(bytes); }
  bool any_paused() const { return any_paused_.load(std::memory_order_acquire); }
  // The paused connections, once there is room again (empty otherwise); they may read on.
  std::vector<std::shared_ptr<Connection>> take_paused_if_room();
  // A recv_into was ever posted: until then a frame need not look for one.
  void note_recv_into() { any_into_.store(true, std::memory_order_relaxed); }
  bool any_recv_into() const { return any_into_.load(std::memory_order_relaxed); }

  static constexpr std::size_t kRetryKeyWindow = 16384;

 private:
  bool full_locked() const;
  // A done recv with a slot: filled (wake: its thread may sleep on its waker). False: it has a
  // promise, to complete after the lock.
  static bool fill_slot(RecvWaiter& waiter, Result<Received>&& result, bool wake);

  const CommConfig& limits_;
  std::mutex mutex_;
  std::optional<Error> closed_;
  std::unordered_map<std::uint32_t, std::deque<Result<Received>>> arrived_;
  std::unordered_map<std::uint32_t, std::deque<std::shared_ptr<RecvWaiter>>> waiters_;
  std::optional<Error> unreported_;  // a broken stream's error that no recv has seen yet
  std::uint64_t unreceived_bytes_ = 0, unreceived_messages_ = 0;
  std::atomic<std::uint64_t> partial_bytes_{0};  // frames being read, storage allocated
  std::vector<std::shared_ptr<Connection>> paused_;
  std::atomic<bool> any_paused_{false};
  std::atomic<bool> any_into_{false};
  // The peer's established connections. A sender moves to another connection only once it
  // gave up the one it wrote on, and then flags its first frame there (kFlagSupersedes):
  // whatever the other connections still bring is older (a stalled path that recovers, a
  // kernel still sending an abandoned socket's bytes), and delivered after that frame it
  // would break the per-tag order. They are superseded: their frames are dropped, unacked
  // (their senders counted them sent unacknowledged, or unknown), and they are ended, those
  // the peer wrote on at once, the others when a frame from the peer turns up there. A
  // connection the peer never wrote on is the other side's dial of the same moment: ending it
  // would lose what this side wrote there.
  std::vector<Connection*> reading_;
  // The retry keys of the last kRetryKeyWindow messages delivered with one; oldest first in
  // retry_key_order_.
  std::unordered_set<std::uint64_t> retry_keys_seen_;
  std::deque<std::uint64_t> retry_key_order_;
  std::shared_ptr<Connection> caller_read_;
  // The recvs waiting with a timeout. One is forgotten here when it is done, or when a frame
  // is being read into it (the frame completes it, whenever it ends).
  DeadlineList deadlines_;
};

}  // namespace wcomm
