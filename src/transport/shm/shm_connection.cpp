// ShmConnection: the byte stream over two shared-memory rings.
#include "transport/shm/shm_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <optional>

#include "transport/socket_stream.h"
#include "transport/thread_waker.h"

namespace wcomm::transport::shm {
namespace {

void ring_doorbell(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = ::write(fd, &one, sizeof one);  // EAGAIN: it rings already
}
void drain_doorbell(int fd) {
  std::uint64_t count;
  [[maybe_unused]] ssize_t ignored = ::read(fd, &count, sizeof count);
}

// Where `done` bytes into buffers falls: (buffer index, offset inside it).
template <class Buffers>
std::pair<std::size_t, std::size_t> locate(const Buffers& buffers, std::size_t done) {
  std::size_t i = 0;
  while (i < buffers.size() && done >= buffers[i].size()) done -= buffers[i++].size();
  return {i, done};
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(asio::any_io_executor executor, std::unique_ptr<Endpoint> endpoint, std::string description)
      : executor_(std::move(executor)),
        e_(std::move(endpoint)),
        out_(e_->mapping->header().ring[e_->side]),
        in_(e_->mapping->header().ring[1 - e_->side]),
        out_ring_(e_->mapping->ring_data(e_->side)),
        in_ring_(e_->mapping->ring_data(1 - e_->side)),
        size_(e_->mapping->header().ring_bytes),
        description_(std::move(description)) {}
  ~ShmConnection() override { close(); }

  // ---- writing (one writer) ---------------------------------------------------------------

  void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) override {
    auto write = std::make_shared<Write>(Write{std::move(buffers), 0, 0, std::move(handler)});
    write->total = asio::buffer_size(write->buffers);
    step(std::move(write), true);
  }
  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) override {
    if (shut_) {
      ec = asio::error::broken_pipe;
      return 0;
    }
    if (peer_gone_ || in_.closed.load(std::memory_order_acquire)) {
      ec = asio::error::connection_reset;
      return 0;
    }
    // Inline records only: a remote record cannot be finished before this returns.
    return put(buffers, 0, Mode::kStopAtRemote);
  }
  void try_write_now(const void* data, std::size_t size) override {
    if (shut_) return;
    put(std::vector<asio::const_buffer>{asio::buffer(data, size)}, 0, Mode::kInlineOnly);
  }

  // ---- reading (one reader) ---------------------------------------------------------------

  std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                       std::error_code& ec) override {
    if (shut_) {
      ec = asio::error::operation_aborted;
      return 0;
    }
    auto [i, offset] = locate(buffers, skip);
    std::size_t total = 0;
    bool progressed = false;
    while (i < buffers.size()) {
      if (record_left_ == 0 && !next_record()) break;
      std::uint8_t* dst = static_cast<std::uint8_t*>(buffers[i].data()) + offset;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(record_left_, buffers[i].size() - offset));
      if (n == 0) {
        ++i, offset = 0;
        continue;
      }
      if (record_kind_ == RecordKind::kInline) {
        ring_copy_out(in_ring_, size_, in_pos_, dst, n);
        in_pos_ += n;
        record_left_ -= n;
        done_ = in_pos_;  // inline bytes are free again as soon as they are copied out
      } else if (!read_remote(dst, n, ec)) {
        break;
      }
      progressed = true;
      total += n;
      offset += n;
      if (offset == buffers[i].size()) ++i, offset = 0;
    }
    if (progressed) release_space();
    if (total == 0 && !ec) {
      // Empty: a doorbell rung for what is read now is stale (see RingControl).
      if (in_.data_rung.load(std::memory_order_relaxed) && in_.data_rung.exchange(0) && !readable_now())
        drain_doorbell(e_->in_data.get());
      if (at_end()) ec = asio::error::eof;
    }
    return total;
  }

  bool maybe_readable() const override { return readable_now(); }

  // A write whose remote records the reader has claimed is handed over even before step()
  // sees it. After shutdown() the claims can no longer move (remote_taken is void), so the
  // answer is final: the reader kept exactly the records counted here (RingControl).
  std::uint64_t bytes_handed_over() const override {
    std::uint64_t n = Connection::bytes_handed_over();
    const std::uint64_t waiting = waiting_total_.load(std::memory_order_seq_cst);
    const std::uint64_t taken = out_.remote_taken.load(std::memory_order_seq_cst) & ~kRemoteVoid;
    if (waiting && taken >= waiting_until_.load(std::memory_order_relaxed)) n += waiting;
    return n;
  }

  std::size_t try_peek(void* data, std::size_t size, std::error_code& ec) override {
    // Inline bytes only (a peek is an optimisation for small frame heads); nothing consumed.
    std::uint64_t pos = in_pos_, left = record_left_;
    RecordKind kind = record_kind_;
    const std::uint64_t head = in_.head.load(std::memory_order_acquire);
    std::size_t got = 0;
    while (got < size) {
      if (left == 0) {
        if (head - pos < kRecordHeaderBytes) break;
        RecordHeader h;
        ring_copy_out(in_ring_, size_, pos, &h, sizeof h);
        pos += kRecordHeaderBytes;
        kind = h.kind;
        left = h.length;
        if (kind != RecordKind::kInline) break;
        continue;
      }
      if (kind != RecordKind::kInline) break;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, size - got));
      ring_copy_out(in_ring_, size_, pos, static_cast<std::uint8_t*>(data) + got, n);
      pos += n, left -= n, got += n;
    }
    if (got == 0 && at_end()) ec = asio::error::eof;
    return got;
  }

  void async_wait_readable(std::function<void(std::error_code)> handler) override {
    if (!sleep_if_idle()) return asio::post(executor_, [handler = std::move(handler)] { handler({}); });
    loop_sleeping_ = true;
    auto wait = std::make_shared<ReadWait>(ReadWait{std::move(handler)});
    auto wake = [this, wait](bool socket_ready) {
      return [this, wait, socket_ready](std::error_code ec) {
        if (wait->fired) return;  // the other watch fired first
        wait->fired = true;
        // Cancelled (stop_waiting_readable, shutdown, close): this connection may be gone.
        if (ec) return wait->handler(ec);
        wake_up(loop_sleeping_, socket_ready);
        // Let go of both watches: a descriptor registered with the loop wakes it on every
        // doorbell even with nothing waiting (see socket_stream.cpp), and callers' threads
        // ring it for themselves. The other watch's handler sees fired and returns.
        data_watch_.reset();
        socket_read_watch_.reset();
        wait->handler(ec);
      };
    };
    if (!watch(data_watch_, e_->in_data.get()) || !watch(socket_read_watch_, e_->socket.get())) {
      wake_up(loop_sleeping_);
      return asio::post(executor_, [wait] { wait->handler(asio::error::bad_descriptor); });
    }
    data_watch_->async_wait(asio::posix::stream_descriptor::wait_read, wake(false));
    socket_read_watch_->async_wait(asio::posix::stream_descriptor::wait_read, wake(true));
  }
  void stop_waiting_readable() override {
    wake_up(loop_sleeping_);
    data_watch_.reset();
    socket_read_watch_.reset();
  }

  Prepared prepare_wait(std::vector<pollfd>& fds) override {
    if (!sleep_if_idle()) return Prepared::kReadable;
    caller_sleeping_ = true;
    fds.push_back({e_->in_data.get(), POLLIN, 0});
    fds.push_back({e_->socket.get(), POLLIN, 0});
    return Prepared::kPolling;
  }
  void finish_wait(std::span<const pollfd> mine) override { wake_up(caller_sleeping_, mine[1].revents != 0); }

  // ---- ending -------------------------------------------------------------------------------

  void shutdown(bool /*keep_receiving*/) override {  // (no lingering end here)
    if (shut_.exchange(true)) return;
    // The reader learns that nothing follows, and that remote records it has not claimed yet
    // are void (a write abandoned part-way: their memory may go); the socket's end wakes
    // anyone polling it.
    out_.remote_taken.fetch_or(kRemoteVoid, std::memory_order_seq_cst);
    out_.closed.store(1, std::memory_order_seq_cst);
    ring_doorbell(e_->out_data.get());
    ::shutdown(e_->socket.get(), SHUT_RDWR);
    std::error_code ignored;
    for (auto* w : {&data_watch_, &space_watch_, &socket_read_watch_, &socket_write_watch_})
      if (*w) (*w)->cancel(ignored);
  }
  void close() override {
    if (closed_) return;
    shutdown(false);
    for (auto* w : {&data_watch_, &space_watch_, &socket_read_watch_, &socket_write_watch_}) w->reset();
    // The descriptors go now; the mapping stays until this object does (nothing may read
    // unmapped memory, however late).
    for (UniqueFd* fd : {&e_->socket, &e_->in_data, &e_->in_space, &e_->out_data, &e_->out_space}) *fd = UniqueFd();
    closed_ = true;
  }
  std::string describe() const override { return description_; }
  Traits traits() const override {
    Traits t;
    t.name = "shm";
    t.same_host = true;
    return t;
  }
  std::string_view payload_path() const override {
    return out_.consumer_reads_producer.load(std::memory_order_relaxed) ? "cma" : "ring";
  }

 private:
  enum class Mode { kInlineOnly, kStopAtRemote, kRemote };
  struct Write {
    std::vector<asio::const_buffer> buffers;
    std::size_t done, total;
    IoHandler handler;
  };
  struct ReadWait {
    std::function<void(std::error_code)> handler;
    bool fired = false;
  };

  std::uint64_t free_space() const { return size_ - (out_head_ - out_.tail.load(std::memory_order_acquire)); }

  // Appends records for buffers from `done` on, as many as fit now, and publishes them.
  // Returns the new `done`.
  std::size_t put(const std::vector<asio::const_buffer>& buffers, std::size_t done, Mode mode) {
    const bool remote = mode != Mode::kInlineOnly && out_.consumer_reads_producer.load(std::memory_order_relaxed);
    const auto eligible = [&](std::size_t left) { return remote && left >= kRemoteMinBytes; };
    auto [i, offset] = locate(buffers, done);
    const std::uint64_t before = out_head_;
    while (i < buffers.size()) {
      const std::size_t left = buffers[i].size() - offset;
      if (left == 0) {
        ++i, offset = 0;
        continue;
      }
      if (eligible(left)) {
        if (mode == Mode::kStopAtRemote || free_space() < kRemoteRecordBytes) break;
        const RecordHeader h{RecordKind::kRemote, 0, left};
        const std::uint64_t address = reinterpret_cast<std::uint64_t>(buffers[i].data()) + offset;
        ring_copy_in(out_ring_, size_, out_head_, &h, sizeof h);
        ring_copy_in(out_ring_, size_, out_head_ + kRecordHeaderBytes, &address, sizeof address);
        out_head_ += kRemoteRecordBytes;
        remote_end_ = out_head_;
        done += left;
        ++i, offset = 0;
        continue;
      }
      const std::uint64_t space = free_space();
      if (space <= kRecordHeaderBytes) break;
      // One inline record for the buffers up to the next one that goes remote.
      std::uint64_t room = space - kRecordHeaderBytes, n = 0;
      while (i < buffers.size() && room > 0) {
        const std::size_t l = buffers[i].size() - offset;
        if (l == 0) {
          ++i, offset = 0;
          continue;
        }
        if (eligible(l)) break;
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(l, room));
        ring_copy_in(out_ring_, size_, out_head_ + kRecordHeaderBytes + n,
                     static_cast<const std::uint8_t*>(buffers[i].data()) + offset, k);
        n += k, room -= k, offset += k, done += k;
        if (offset == buffers[i].size()) ++i, offset = 0;
      }
      const RecordHeader h{RecordKind::kInline, 0, n};
      ring_copy_in(out_ring_, size_, out_head_, &h, sizeof h);
      out_head_ += kRecordHeaderBytes + n;
    }
    if (out_head_ != before) {
      out_.head.store(out_head_, std::memory_order_release);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (out_.consumer_sleepers.load(std::memory_order_relaxed)) {
        out_.data_rung.store(1, std::memory_order_relaxed);
        ring_doorbell(e_->out_data.get());
      }
    }
    return done;
  }

  // Writes what fits; then waits for space, or for the reader to finish with remote records.
  // Like asio's operations, the handler never runs inside the call that started the write.
  void step(std::shared_ptr<Write> w, bool first) {
    std::error_code ec;
    // The reader's tail before we look: if it moves after this, we must not sleep.
    const std::uint64_t tail = out_.tail.load(std::memory_order_acquire);
    const auto written = [&] {
      return w->done == w->total && (out_.remote_taken.load(std::memory_order_acquire) & ~kRemoteVoid) >= remote_end_;
    };
    if (shut_) ec = asio::error::operation_aborted;
    else if (written()) {}  // the reader took all of it, even if it has gone since
    else if (peer_gone_ || in_.closed.load(std::memory_order_acquire)) ec = asio::error::connection_reset;
    else w->done = put(w->buffers, w->done, Mode::kRemote);
    const bool finished = ec || written();
    if (finished) {
      waiting_total_.store(0, std::memory_order_seq_cst);  // counted here instead (below)
      if (!ec) hand_over(w->total);  // the reader has all of it, though the handler runs later
      if (first) return asio::post(executor_, [w, ec] { w->handler(ec, w->done); });
      return w->handler(ec, w->done);
    }
    // Published whole, remote records not yet read: once the reader's tail passes remote_end_
    // it is handed over, whether or not this step has run again (bytes_handed_over).
    if (w->done == w->total) {
      waiting_until_.store(remote_end_, std::memory_order_relaxed);
      waiting_total_.store(w->total, std::memory_order_seq_cst);
    }
    // Blocked: sleep until the reader frees space (it rings out_space when it sees the flag;
    // a tail that moved since we looked means it may have freed some before the flag was up).
    out_.producer_sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (out_.tail.load(std::memory_order_relaxed) != tail) {
      out_.producer_sleeping.store(0, std::memory_order_relaxed);
      return asio::post(executor_, [this, w] { step(w, false); });
    }
    if (!watch(space_watch_, e_->out_space.get()) || !watch(socket_write_watch_, e_->socket.get()))
      return asio::post(executor_, [w] { w->handler(asio::error::bad_descriptor, w->done); });
    auto fired = std::make_shared<bool>(false);
    auto wake = [this, w, fired](bool socket_ready) {
      return [this, w, fired, socket_ready](std::error_code ec) {
        if (*fired) return;
        *fired = true;
        if (ec) return w->handler(ec, w->done);  // cancelled by shutdown or close: this may be gone
        out_.producer_sleeping.store(0, std::memory_order_relaxed);
        std::error_code ignored;
        if (space_watch_) space_watch_->cancel(ignored);
        if (socket_write_watch_) socket_write_watch_->cancel(ignored);
        drain_doorbell(e_->out_space.get());
        if (socket_ready) check_peer_gone();
        step(w, false);
      };
    };
    space_watch_->async_wait(asio::posix::stream_descriptor::wait_read, wake(false));
    socket_write_watch_->async_wait(asio::posix::stream_descriptor::wait_read, wake(true));
  }

  // Reads the next record's header, if one has been published. The reader alone moves in_pos_.
  bool next_record() {
    const std::uint64_t head = in_.head.load(std::memory_order_acquire);
    while (head != in_pos_) {
      RecordHeader h;
      ring_copy_out(in_ring_, size_, in_pos_, &h, sizeof h);
      in_pos_ += kRecordHeaderBytes;
      record_kind_ = h.kind;
      record_left_ = h.length;
      if (h.kind == RecordKind::kRemote) {
        ring_copy_out(in_ring_, size_, in_pos_, &remote_address_, sizeof remote_address_);
        in_pos_ += sizeof remote_address_;
      }
      if (record_left_ > 0) return true;
      done_ = in_pos_;
    }
    return false;
  }

  // Copies n bytes from the writer's memory at `from` to dst; ec on failure.
  static void pull(pid_t pid, std::uint8_t* dst, std::uint64_t from, std::size_t n, std::error_code& ec) {
    std::size_t got = 0;
    while (got < n) {
      iovec local{dst + got, n - got};
      iovec remote{reinterpret_cast<void*>(from + got), n - got};
      const ssize_t r = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
      if (r <= 0) {
        // ESRCH: the writer is gone; EFAULT: its memory is (both end the stream).
        ec = r < 0 && errno == ESRCH ? asio::error::connection_reset : asio::error::connection_aborted;
        return;
      }
      got += static_cast<std::size_t>(r);
    }
  }

  // Copies n bytes of the current remote record straight from the writer's memory. A large
  // one is split with a second thread: the kernel copies page by page, slower than memcpy,
  // and the writer's core idles meanwhile.
  bool read_remote(std::uint8_t* dst, std::size_t n, std::error_code& ec) {
    std::size_t first = n;
    std::future<std::error_code> second;
    if (n >= kSplitMinBytes) {
      first = (n / 2) & ~std::size_t(4095);
      try {
        second = std::async(std::launch::async, [pid = e_->peer_pid, dst, from = remote_address_, first, n] {
          std::error_code e;
          pull(pid, dst + first, from + first, n - first, e);
          return e;
        });
      } catch (const std::system_error&) {
        first = n;  // no thread to be had: all of it here
      }
    }
    pull(e_->peer_pid, dst, remote_address_, first, ec);
    if (second.valid()) {
      const std::error_code e = second.get();
      if (!ec) ec = e;
    }
    if (ec) return false;
    remote_address_ += n;
    record_left_ -= n;
    // A writer that gave up the memory may have done so while we read it: unless this side
    // claims the record first, what it copied is void (RingControl::remote_taken).
    std::uint64_t seen = in_.remote_taken.load(std::memory_order_seq_cst);
    do {
      if (seen & kRemoteVoid) {
        ec = asio::error::connection_aborted;
        return false;
      }
    } while (record_left_ == 0 && !in_.remote_taken.compare_exchange_weak(seen, in_pos_, std::memory_order_seq_cst));
    if (record_left_ == 0) {
      done_ = in_pos_;  // claimed: the writer's memory is no longer needed
      release_space();
    }
    return true;
  }

  void release_space() {
    in_.tail.store(done_, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (in_.producer_sleeping.load(std::memory_order_relaxed)) ring_doorbell(e_->in_space.get());
  }

  // Any thread (a waiter need not be the reader): only shared state. The tail equals the
  // reader's position except inside a record, whose bytes are then published already.
  bool readable_now() const {
    return shut_ || peer_gone_ || in_.closed.load(std::memory_order_acquire) ||
           in_.head.load(std::memory_order_acquire) != in_.tail.load(std::memory_order_acquire);
  }
  // The stream has ended: the writer closed it (or went away) and everything is read.
  bool at_end() const {
    if (!in_.closed.load(std::memory_order_acquire) && !peer_gone_) return false;
    return record_left_ == 0 && in_.head.load(std::memory_order_acquire) == in_pos_;
  }
  // Counts this waiter in as a sleeper unless there is something to read; false (not
  // counted) if there is.
  bool sleep_if_idle() {
    if (readable_now()) return false;
    in_.consumer_sleepers.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!readable_now()) return true;
    in_.consumer_sleepers.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  // A sleeper woke up (or stopped waiting): counts it out, notices the peer's end when the
  // socket said something, and clears a doorbell left ringing with nothing to read (the
  // reader that emptied the ring may have looked before the ring came). Data published
  // before that ring is seen by the next look. A ring that comes between the look and the
  // drain was meant for another sleeper (the loop, whose epoll would find the doorbell
  // quiet): it is rung again.
  void wake_up(bool& sleeping, bool socket_ready = false) {
    if (!sleeping) return;
    sleeping = false;
    in_.consumer_sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (socket_ready) check_peer_gone();
    if (readable_now()) return;
    drain_doorbell(e_->in_data.get());
    if (readable_now()) ring_doorbell(e_->in_data.get());
  }
  // Nothing is written on the socket after set-up: readable means the peer is gone.
  void check_peer_gone() {
    if (!e_->socket) return;
    char byte;
    const ssize_t r = ::recv(e_->socket.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) peer_gone_ = true;
  }

  // A duplicate of fd registered with the loop on first use (watch_duplicate).
  bool watch(std::optional<asio::posix::stream_descriptor>& watcher, int fd) {
    return !watch_duplicate(watcher, executor_, fd);
  }

  asio::any_io_executor executor_;
  std::unique_ptr<Endpoint> e_;
  RingControl& out_;
  RingControl& in_;
  std::uint8_t* out_ring_;
  std::uint8_t* in_ring_;
  const std::uint64_t size_;
  std::string description_;
  // Writer.
  std::uint64_t out_head_ = 0;
  std::uint64_t remote_end_ = 0;  // the write completes once the reader's tail is past this
  // The write published whole that waits for the reader's tail to pass waiting_until_ (0: none).
  std::atomic<std::uint64_t> waiting_total_{0}, waiting_until_{0};
  // Reader.
  std::uint64_t in_pos_ = 0;      // next byte of the ring to look at
  std::uint64_t done_ = 0;        // what the tail may say: everything before is consumed
  RecordKind record_kind_ = RecordKind::kInline;
  std::uint64_t record_left_ = 0;
  std::uint64_t remote_address_ = 0;
  std::atomic<bool> peer_gone_{false};
  std::atomic<bool> shut_{false};
  bool loop_sleeping_ = false;  // the loop's async_wait_readable counts as a sleeper
  bool caller_sleeping_ = false;  // a thread between prepare_wait and finish_wait counts as one
  bool closed_ = false;
  std::optional<asio::posix::stream_descriptor> data_watch_, space_watch_, socket_read_watch_, socket_write_watch_;
};

}  // namespace

std::unique_ptr<Connection> make_connection(asio::any_io_executor executor, std::unique_ptr<Endpoint> endpoint,
                                            std::string description) {
  return std::make_unique<ShmConnection>(std::move(executor), std::move(endpoint), std::move(description));
}

}  // namespace wcomm::transport::shm
