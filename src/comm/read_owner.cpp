// ReadOwner: the loop's and the callers' sides of reading, and the hand-over between them.
#include "comm/read_owner.h"

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "comm/comm_impl.h"
#include "core/operation.h"
#include "transport/thread_waker.h"

namespace wcomm {

namespace {
constexpr auto kStandDown = std::chrono::milliseconds(1);
constexpr auto kLongStandDown = std::chrono::milliseconds(16);
}  // namespace

ReadOwner::ReadOwner(Comm::Impl& impl, transport::Connection& connection, FrameReader& reader, Sink& sink)
    : impl_(impl), connection_(connection), reader_(reader), sink_(sink) {}

// Reads frames until `until` is complete, nothing more has arrived, or reading must stop.
// Only the owner calls this, with no lock held: each frame's recv completes right here.
ReadOwner::Pumped ReadOwner::pump(Reader reader, const Awaited* until, Later& later) {
  const FrameReader::DecodeData decode = [this](const FrameHeader& h, std::span<const std::uint8_t> m) {
    return sink_.decode(h, m);
  };
  while (true) {
    // Frames read ahead with the one awaited are read on too: whoever reads next, or the
    // loop watching the transport, would not know they are here.
    if (until && until->done() && !reader_.holds_bytes()) return Pumped::kDone;
    if (reader_.between_frames()) {
      std::lock_guard lock(mu_);
      if (paused_ || closing_) return Pumped::kPaused;
      if (sink_.inbound_full()) {
        paused_ = true;  // the transport now pushes back on the sender until the application drains
        return Pumped::kPaused;
      }
    }
    switch (reader_.read(decode)) {
      case FrameReader::Status::kWaiting: {
        // (Mid-frame too: close() woke this caller, which gives its frame up.)
        std::lock_guard lock(mu_);
        return closing_ ? Pumped::kPaused : Pumped::kWaiting;
      }
      case FrameReader::Status::kFailed: {
        // A stream shut by close() fails the frame with close()'s reason, not the read's.
        std::optional<Error> why;
        {
          std::lock_guard lock(mu_);
          if (closing_) why = close_reason_;
        }
        sink_.abandon_frame(why ? *why : reader_.error(), later);
        return Pumped::kFailed;
      }
      case FrameReader::Status::kFrame:
        break;
    }
    Frame frame = reader_.take();
    if (frame.header.kind == FrameKind::kHeartbeat) {
      sink_.on_heartbeat(reader);
      continue;
    }
    if (frame.header.kind == FrameKind::kAck) {
      sink_.on_acks(frame, reader);
      continue;
    }
    if (frame.header.kind != FrameKind::kData) {
      // CLOSE, or a handshake frame after the handshake: reading ends here (the loop reports it).
      reader_.fail_with(frame.header.kind == FrameKind::kClose
                            ? Error{ErrorCode::kConnectionClosed, reader_.peer_name() + " closed the connection"}
                            : Error{ErrorCode::kProtocol, "unexpected frame kind " +
                                                              std::to_string(int(frame.header.kind)) +
                                                              " after the handshake"});
      return Pumped::kFailed;
    }
    sink_.on_frame(std::move(frame), reader, later);
    if (!later.empty()) return Pumped::kYield;  // the loop runs them before it reads on
  }
}

// ---- the loop's side --------------------------------------------------------------------

void ReadOwner::start(std::weak_ptr<void> life) {
  {
    // (Under mu_: a caller's thread may read this connection already, as soon as its peer has
    // it, and reads life_ when it lets go; TSan, CI at 928c27c.)
    std::lock_guard lock(mu_);
    life_ = std::move(life);
  }
  read_from_loop();
}

void ReadOwner::resume() {
  std::weak_ptr<void> life;
  {
    std::lock_guard lock(mu_);
    if (!paused_) return;
    paused_ = false;
    life = life_;
  }
  impl_.post([this, life] {
    if (auto keep = life.lock()) read_from_loop();
  });
}

void ReadOwner::read_from_loop() {
  Pumped result = Pumped::kYield;
  while (result == Pumped::kYield) {
    if (closed_) return;
    {
      std::lock_guard lock(mu_);
      if (failed_) {
        // A caller's read failed and it handed the report to us.
        failed_ = false;
        closed_ = true;
      } else if (owner_ == Owner::kCaller) {
        return stand_down();
      } else if (paused_) {
        return;  // bytes wait unread on purpose; resume() reads on
      } else {
        owner_ = Owner::kLoop;
      }
    }
    if (closed_) return sink_.on_read_failed(reader_.error());
    Later later;
    result = pump(Reader::kLoop, nullptr, later);
    {
      std::lock_guard lock(mu_);
      owner_ = Owner::kNone;
    }
    loop_done_.notify_all();
    // Callbacks run once the reading is let go (one may block on another recv of this peer,
    // whose thread then reads for itself), and after each frame that has some: the
    // application sees (and frees) each message before the next is read.
    run(later);
  }
  if (result == Pumped::kFailed) {
    closed_ = true;
    return sink_.on_read_failed(reader_.error());
  }
  // The loop read for itself: a later stand-down starts short.
  stand_down_period_ = kStandDown;
  // Paused: watching would report the unread bytes at once, again and again.
  if (result == Pumped::kWaiting) arm();
}

void ReadOwner::arm() {
  if (closed_ || armed_) return;
  armed_ = true;
  connection_.async_wait_readable([this, life = life_](std::error_code ec) {
    // Aborted: whoever stopped the wait has cleared armed_ (or the stream is closed). The end
    // of the stream is the reader's to find and report; an error of the wait itself (no
    // descriptor left to watch with) would only come back on the next wait: it ends the
    // connection, rather than spin.
    if (ec == asio::error::operation_aborted) return;
    auto keep = life.lock();
    if (!keep) return;
    armed_ = false;
    if (ec) return sink_.on_read_failed({ErrorCode::kConnectionClosed, "cannot wait for the connection: " + ec.message()});
    read_from_loop();
  });
}

void ReadOwner::stand_down() {
  connection_.stop_waiting_readable();  // its handler sees operation_aborted
  armed_ = false;
  if (stand_down_timer_) return;
  stand_down_timer_.emplace(impl_.io, stand_down_period_);
  standing_down_.store(true);
  stand_down_timer_->async_wait([this, life = life_, generation = ++stand_down_generation_](std::error_code ec) {
    auto keep = life.lock();
    // A timer that read_soon() or close() dropped may still fire: only the last counts.
    if (ec || !keep || generation != stand_down_generation_) return;
    end_stand_down();
    bool caller;
    {
      std::lock_guard lock(mu_);
      caller = owner_ == Owner::kCaller;
    }
    if (!caller) return read_from_loop();
    if (stand_down_period_ >= kLongStandDown) return arm();
    stand_down_period_ *= 2;
    stand_down();
  });
}

void ReadOwner::end_stand_down() {
  stand_down_timer_.reset();
  ++stand_down_generation_;
  standing_down_.store(false);
}

bool ReadOwner::paused() const {
  std::lock_guard lock(mu_);
  return paused_;
}

void ReadOwner::read_soon() {
  if (closed_ || !stand_down_timer_) return;  // the loop watches the connection already
  {
    std::lock_guard lock(mu_);
    if (owner_ == Owner::kCaller) {
      read_requested_ = true;  // the reader hands the reading back when it stops
      return;
    }
  }
  end_stand_down();
  read_from_loop();
}

void ReadOwner::run(Later& later) {
  for (auto& fn : later) fn();
  later.clear();
}

void ReadOwner::close(const Error& why, Ending how) {
  if (closed_) return;
  closed_ = true;
  end_stand_down();
  armed_ = false;
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    close_reason_ = why;
    ending_ = how;
    // A caller may be waiting on the stream: nothing more is sent (nor, for an abort,
    // received: a frame the peer is still sending must not complete here once the peer has
    // been told it failed), but the rest is left to the caller, so that nothing is released
    // under its feet. Woken (under mu_: it is still reading, so its waker is there), it
    // stops at its next look and hands the stream back to be ended.
    if (owner_ == Owner::kCaller) {
      connection_.shutdown(/*keep_receiving=*/how == Ending::kGraceful);
      return caller_waker_->wake();
    }
  }
  end_stream(how);
  Later later;
  sink_.abandon_frame(why, later);
  run(later);
}

void ReadOwner::end_stream(Ending how) {
  if (how == Ending::kAbort) return connection_.close();
  // Long enough for a live peer to read what it was sent and answer our end with its own;
  // a peer that does not (stopped, gone from the network) holds close() up this long.
  constexpr auto kLinger = std::chrono::seconds(2);
  connection_.close_gracefully(kLinger);
}

// ---- a caller's side --------------------------------------------------------------------

bool ReadOwner::begin_caller(transport::ThreadWaker& waker, bool wait_out_loop) {
  std::unique_lock lock(mu_);
  // The loop's reading is short (what has arrived); wait it out rather than sleep for a
  // message the loop would then have to hand over.
  if (wait_out_loop) loop_done_.wait(lock, [&] { return owner_ != Owner::kLoop; });
  if (owner_ != Owner::kNone || paused_ || failed_ || closing_) return false;
  owner_ = Owner::kCaller;
  caller_waker_ = &waker;
  return true;
}

void ReadOwner::end_caller(bool failed_here, std::size_t own_waiting) {
  const bool others_waiting = sink_.others_waiting(own_waiting);
  bool closing, requested;
  std::optional<Error> reason;
  std::weak_ptr<void> life;
  Ending how;
  {
    std::lock_guard lock(mu_);
    life = life_;
    owner_ = Owner::kNone;
    caller_waker_ = nullptr;
    how = ending_;
    if (failed_here) failed_ = true;  // the loop reports it
    closing = closing_;
    requested = read_requested_;
    read_requested_ = false;
    reason = close_reason_;
  }
  if (closing) {  // close() came while we read: the frame and the stream are left to us
    Later later;
    sink_.abandon_frame(*reason, later);
    run(later);
  }
  // The loop may be standing down; it must look now if it has something to do: close the
  // stream, report a failure, or read for other waiters (who would otherwise wait for its timer).
  if (!closing && !failed_here && !others_waiting && !requested) return;
  impl_.post([this, life, closing, how] {
    auto keep = life.lock();
    if (!keep) return;
    if (closing) return end_stream(how);
    end_stand_down();
    read_from_loop();
  });
}

void ReadOwner::read_for(const Awaited& until, Clock::time_point deadline,
                         std::chrono::microseconds busy_poll) {
  transport::ThreadWaker& waker = transport::this_thread_waker();
  if (!waker.valid() || !begin_caller(waker)) return;
  Pumped result = Pumped::kWaiting;
  Later later;  // stays empty: a caller's thread hands callbacks to the loop itself
  // Busy polling: read again and again without sleeping, until the message is there, the
  // window ends, or reading cannot go on here.
  if (busy_poll.count() > 0) {
    const auto window_end = std::min(deadline, Clock::now() + busy_poll);
    // Between reads, a look at the transport (no lock, no system call) until it may have
    // bytes: what arrives is seen at once, not after a whole empty read. The clock is read
    // after each read, and every few looks.
    for (unsigned looks = 1; result == Pumped::kWaiting; ++looks) {
      if (until.done() || connection_.maybe_readable()) {
        result = pump(Reader::kCallerBusyPolling, &until, later);
        if (result == Pumped::kWaiting && Clock::now() >= window_end) break;
      } else if (looks % 16 == 0 && Clock::now() >= window_end) {
        break;
      }
    }
  }
  // Then sleep until bytes arrive or the promise completes elsewhere (which wakes us).
  while (result == Pumped::kWaiting) {
    // (Completed meanwhile: done. A flag set after this look wakes the waker, which stays set.)
    if (until.promise ? !detail::PromiseAccess::set_waker(*until.promise, &waker) : until.done()) break;
    const auto woke = connection_.wait_readable(deadline, waker);
    if (until.promise) detail::PromiseAccess::clear_waker(*until.promise, &waker);
    if (woke == transport::Connection::Wait::kDeadline) break;
    result = pump(Reader::kCaller, &until, later);
  }
  end_caller(result == Pumped::kFailed);
}

bool ReadOwner::read_any(std::span<const Part> parts, Clock::time_point deadline, int extra_fd,
                         std::chrono::microseconds busy_poll) {
  transport::ThreadWaker& waker = transport::this_thread_waker();
  if (!waker.valid()) throw std::system_error(errno, std::generic_category(), "an eventfd to wait on");
  const auto any_done = [&] {
    return std::any_of(parts.begin(), parts.end(), [](const Part& p) { return p.until->done(); });
  };
  // The parts whose connections this thread reads, handed back however it leaves. A wait with
  // no time to wait does not wait out the loop's reading either (a non-blocking look).
  struct Mine {
    std::vector<const Part*> parts;
    std::span<const Part> all;
    void hand_back(std::size_t k, bool failed) {
      const ReadOwner* reader = parts[k]->reader;
      // Recvs of ours it leaves waiting are ours to come back for: no reason to wake the loop.
      const auto own = std::count_if(all.begin(), all.end(),
                                     [&](const Part& p) { return p.reader == reader && !p.until->done(); });
      parts[k]->reader->end_caller(failed, static_cast<std::size_t>(own));
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(k));
    }
    ~Mine() {
      while (!parts.empty()) hand_back(parts.size() - 1, false);
    }
  } mine{{}, parts};
  const bool wait_out_loop = Clock::now() < deadline;
  for (const Part& part : parts)
    if (part.reader && part.reader->begin_caller(waker, wait_out_loop)) mine.parts.push_back(&part);
  Later later;  // stays empty: a caller's thread hands callbacks to the loop itself
  // Which of mine to read: all at first, then those the last wait found readable.
  const auto to_read = std::make_unique<bool[]>(parts.size());
  std::fill_n(to_read.get(), mine.parts.size(), true);
  // Reads what has arrived where to_read says; a connection that cannot go on here (paused,
  // failed) is handed back to the loop at once.
  const auto pump_mine = [&](Reader how) {
    for (std::size_t k = mine.parts.size(); k-- > 0;) {
      if (!to_read[k]) continue;
      // (Busy polling: a look first, as in read_for.)
      if (how == Reader::kCallerBusyPolling && !mine.parts[k]->reader->connection_.maybe_readable()) continue;
      const Awaited until{mine.parts[k]->until};
      const Pumped result = mine.parts[k]->reader->pump(how, &until, later);
      if (result != Pumped::kPaused && result != Pumped::kFailed) continue;
      mine.hand_back(k, result == Pumped::kFailed);
      bool* flags = to_read.get();
      std::copy(flags + k + 1, flags + mine.parts.size() + 1, flags + k);
    }
  };
  pump_mine(Reader::kCaller);
  if (busy_poll.count() > 0 && !mine.parts.empty()) {  // (never spin for what others read)
    const auto window_end = std::min(deadline, Clock::now() + busy_poll);
    while (!any_done() && !mine.parts.empty() && Clock::now() < window_end) pump_mine(Reader::kCallerBusyPolling);
  }
  bool extra = false;
  std::vector<transport::Connection*> connections;
  while (!any_done()) {
    // Completions elsewhere (the loop's, or another caller's) wake this thread.
    std::size_t registered = 0;
    while (registered < parts.size() && detail::PromiseAccess::set_waker(*parts[registered].until, &waker)) ++registered;
    const bool wait = registered == parts.size();  // else one completed meanwhile
    transport::WaitEnd end;
    if (wait) {
      connections.clear();
      for (const Part* part : mine.parts) connections.push_back(&part->reader->connection_);
      end = transport::wait_any_readable(connections, {to_read.get(), connections.size()}, deadline, waker, extra_fd);
    }
    for (std::size_t i = 0; i < registered; ++i) detail::PromiseAccess::clear_waker(*parts[i].until, &waker);
    extra = end.extra;
    if (!wait || end.extra || end.deadline) break;
    // A wake-up may be close() on one of mine (ReadOwner::close): each looks.
    if (end.woken) std::fill_n(to_read.get(), mine.parts.size(), true);
    pump_mine(Reader::kCaller);
  }
  return extra;
}

}  // namespace wcomm
