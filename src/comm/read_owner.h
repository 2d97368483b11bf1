// ReadOwner: who reads a connection's frames, in one place. Either the loop thread reads
// (woken by the transport when bytes arrive), or a thread blocked in recv() reads its own
// message (the receive fast path, docs/thread-model.md): the kernel then wakes the thread
// that wants the message, not the loop and then that thread.
//
// The state machine (owner_, under mu_; everything else about reading is touched only by
// the owner, with no lock held, so completions never run under a wcomm lock):
//
//   kNone   --loop: bytes arrived, resume, read_soon-->  kLoop    (reads what has arrived)
//   kLoop   --drained / paused / failed-->               kNone    (drained: loop waits again)
//   kNone   --begin_caller()-->                          kCaller  (waits for a kLoop to end)
//   kCaller --end_caller()-->                            kNone    (posts the loop if it must look)
//
// A caller never takes a paused, failed or closing reader. While a caller reads, the loop
// stands down: it stops watching the connection (each arriving message would wake it) and
// looks again after 1 ms, then after twice as long each time it finds the caller still
// reading, up to 16 ms; after that it watches again (a long wait costs no timer wake-ups).
// Whoever needs the loop to read meanwhile says so: a reader that stops while other recvs
// wait (end_caller), and a recv parked for a callback or with a timeout (read_soon).
//
// Sleeping callers and completers meet under the promise's mutex (detail::PromiseAccess):
// a completion always wakes a registered sleeper, and never after it has left.
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <functional>
#include <span>
#include <vector>

#include <asio.hpp>

#include "comm/frame_reader.h"
#include "wcomm/comm.h"
#include "wcomm/future.h"

namespace wcomm {

struct Received;
using Clock = std::chrono::steady_clock;
// Completion callbacks held back until the reader lets go of the reading.
using Later = std::vector<std::function<void()>>;

class ReadOwner {
 public:
  enum class Reader { kLoop, kCaller, kCallerBusyPolling };

  // What the reads are for (the Connection). Called by the owner, with no ReadOwner lock held
  // except where said.
  class Sink {
   public:
    virtual ~Sink() = default;
    // Storage for a DATA frame's segments.
    virtual Result<DecodedData> decode(const FrameHeader& header, std::span<const std::uint8_t> manifest) = 0;
    // A whole DATA frame: deliver it (this completes its recv). Callbacks that must run on
    // the loop go to `later`, which the loop runs once it no longer owns the reading.
    virtual void on_frame(Frame frame, Reader reader, Later& later) = 0;
    // An ACK frame: the peer acknowledges messages this side sent (CommOptions::ack).
    virtual void on_acks(const Frame& frame, Reader reader) = 0;
    // A HEARTBEAT frame (liveness only; its bytes were counted).
    virtual void on_heartbeat(Reader reader) = 0;
    // Under mu_: whether the inbound bound is reached (then reading pauses until resume()).
    virtual bool inbound_full() = 0;
    // The frame being read will not complete (the stream failed or was closed).
    virtual void abandon_frame(const Error& why, Later& later) = 0;
    // Whether recvs are waiting beyond `own` (those of the stopping caller that it leaves
    // waiting: it comes back for them, or the loop's stand-down ends within 16 ms).
    virtual bool others_waiting(std::size_t own) = 0;
    // Loop: reading failed (or the peer said CLOSE).
    virtual void on_read_failed(const Error& error) = 0;
  };

  ReadOwner(Comm::Impl& impl, transport::Connection& connection, FrameReader& reader, Sink& sink);

  // What a reading caller waits for: a recv's promise, or a flag set when its message is
  // taken in place (Comm::recv_for: no promise; whoever sets it from another thread wakes the
  // reader's thread waker itself).
  struct Awaited {
    const Promise<Received>* promise = nullptr;
    const std::atomic<bool>* filled = nullptr;
    bool done() const { return promise ? promise->done() : filled->load(std::memory_order_acquire); }
  };

  // ---- loop thread
  // After the handshake (bytes may be waiting already). life: the object this one lives in;
  // work the loop runs later holds it while it runs.
  void start(std::weak_ptr<void> life);
  void resume();  // after a pause for the inbound bound (any thread)
  void read_soon();
  // Ends reading for good and closes the stream (kAbort), or closes it without losing what
  // was handed over to it (kGraceful: the peer's end first, within the linger). While a
  // caller reads, it wakes the caller instead and leaves the rest to it: the caller abandons
  // its frame and hands the stream back to be closed so.
  enum class Ending { kAbort, kGraceful };
  void close(const Error& why, Ending how);

  // ---- any thread
  // A thread blocked on a recv reads the connection until its promise is complete, the
  // deadline passes or it cannot go on (paused, failed, closed). busy_poll: first read for
  // that long without sleeping. Returns at once if another caller reads.
  void read_for(const Awaited& until, Clock::time_point deadline, std::chrono::microseconds busy_poll);
  // The same for a thread waiting for any of several recvs (Comm::wait_any): it reads each
  // part's connection whose reading it can take, until one part's promise is complete, the
  // deadline passes, or extra_fd (if >= 0) is readable (then true). A part without a reader,
  // or whose reading is the loop's or another caller's, is read by them; its completion
  // wakes this thread.
  struct Part {
    ReadOwner* reader;  // may be null
    const Promise<Received>* until;
  };
  static bool read_any(std::span<const Part> parts, Clock::time_point deadline, int extra_fd,
                       std::chrono::microseconds busy_poll);
  bool standing_down() const { return standing_down_.load(); }
  bool paused() const;  // for the inbound bound: the peer is not being read on purpose

 private:
  enum class Owner { kNone, kLoop, kCaller };
  // kYield: a frame left callbacks in `later` (the loop runs them, then reads on).
  enum class Pumped { kDone, kWaiting, kPaused, kFailed, kYield };

  Pumped pump(Reader reader, const Awaited* until, Later& later);
  bool begin_caller(transport::ThreadWaker& waker, bool wait_out_loop = true);
  void end_caller(bool failed_here, std::size_t own_waiting = 0);
  void run(Later& later);
  void read_from_loop();
  void arm();
  void stand_down();
  void end_stand_down();
  void end_stream(Ending how);

  Comm::Impl& impl_;
  transport::Connection& connection_;
  FrameReader& reader_;
  Sink& sink_;

  mutable std::mutex mu_;
  std::condition_variable loop_done_;  // a caller waits out the loop's reading
  Owner owner_ = Owner::kNone;
  bool paused_ = false;
  bool failed_ = false;   // the reader failed: the loop must fail the connection
  bool closing_ = false;  // close() came while a caller read: it hands the stream back
  Ending ending_ = Ending::kAbort;
  transport::ThreadWaker* caller_waker_ = nullptr;  // the reading caller's, while owner_ is kCaller
  bool read_requested_ = false;  // read_soon() came while a caller read
  std::optional<Error> close_reason_;

  // Loop only.
  bool armed_ = false;
  bool closed_ = false;
  std::optional<asio::steady_timer> stand_down_timer_;
  std::chrono::milliseconds stand_down_period_{1};
  std::uint64_t stand_down_generation_ = 0;
  std::atomic<bool> standing_down_{false};
  std::weak_ptr<void> life_;  // set by start (under mu_: callers may read it from then on)
};

}  // namespace wcomm
