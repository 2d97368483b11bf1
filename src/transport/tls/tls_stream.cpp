// TlsStream: see tls_stream.h.
//
// OpenSSL forbids two threads in one SSL object at once, while wcomm's fast paths let a
// caller's thread write (inline send) while another reads (ReadOwner's reader). So every SSL
// call takes mu_, one record at a time: a reader and a writer interleave record by record and
// neither waits for the other's whole message. The socket is never blocked on under mu_: the
// SSL object talks to it through a BIO of non-blocking sends and receives, and waiting (ppoll,
// or the loop's watch) happens with mu_ released.
#include "transport/tls/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "transport/lingering_close.h"
#include "transport/socket_stream.h"
#include "transport/tcp/send_queue_bound.h"
#include "transport/thread_waker.h"
#include "transport/tls/tls_context.h"

namespace wcomm::transport {
namespace {

// tls_category() codes. Others: 1000 + an X509_V_ERR_* (the peer's certificate was refused),
// or an OpenSSL packed error code (>= 1 << 23).
constexpr int kPlainPeer = 1;          // the peer sent plain COMM v1
constexpr int kClosedInHandshake = 2;  // the peer hung up before the handshake completed
constexpr int kVerifyBase = 1000;
constexpr std::size_t kRecord = 16384;  // TLS's largest record payload

class TlsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "wcomm.tls"; }
  std::string message(int code) const override {
    if (code == kPlainPeer)
      return "the peer speaks plain COMM v1, not TLS (comm.tls is set on this node: set comm.tls on the peer too)";
    if (code == kClosedInHandshake)
      return "the peer closed the connection during the TLS handshake (is comm.tls set there, and does its "
             "comm.tls.ca_file hold the CA that signed this node's certificate?)";
    if (code >= kVerifyBase && code < kVerifyBase + 1000)
      return std::string("TLS: the peer's certificate was refused: ") +
             X509_verify_cert_error_string(code - kVerifyBase) +
             " (is it signed by a CA in this node's comm.tls.ca_file?)";
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(code));
    std::string text = std::string("TLS: ") + (reason ? reason : "OpenSSL error " + std::to_string(code));
    if (ERR_GET_REASON(static_cast<unsigned long>(code)) >= SSL_AD_REASON_OFFSET)  // an alert the peer sent
      text += " (the peer refused the handshake: does its comm.tls.ca_file hold the CA that signed this node's "
              "certificate?)";
    return text;
  }
};

class TlsStream;

// The BIO between the SSL object and the socket: non-blocking calls, no SIGPIPE.
struct SocketBio {
  int fd = -1;
  int last_errno = 0;
  char first[4] = {};  // the first bytes the peer sent (to recognise a plain COMM peer)
  std::size_t first_size = 0;
};

int bio_write(BIO* bio, const char* data, int size) {
  auto* s = static_cast<SocketBio*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = ::send(s->fd, data, static_cast<std::size_t>(size), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    else s->last_errno = errno;
    return -1;
  }
}

int bio_read(BIO* bio, char* data, int size) {
  auto* s = static_cast<SocketBio*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = ::recv(s->fd, data, static_cast<std::size_t>(size), MSG_DONTWAIT);
    if (n > 0) {
      const std::size_t keep = std::min<std::size_t>(sizeof s->first - s->first_size, static_cast<std::size_t>(n));
      std::memcpy(s->first + s->first_size, data, keep);
      s->first_size += keep;
      return static_cast<int>(n);
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    else s->last_errno = errno;
    return -1;
  }
}

long bio_ctrl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

BIO_METHOD* socket_bio_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "wcomm socket");
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    return m;
  }();
  return method;
}

class TlsStream final : public Connection {
 public:
  TlsStream(asio::any_io_executor executor, int fd, std::string description, std::shared_ptr<const TlsContext> context,
            bool accepting, std::chrono::microseconds queue_target)
      : executor_(std::move(executor)), context_(std::move(context)), description_("tls " + description) {
    bio_state_.fd = fd;
    if (queue_target.count() > 0) queue_bound_.emplace(queue_target);
    ssl_ = SSL_new(context_->native());
    BIO* bio = BIO_new(socket_bio_method());
    if (!ssl_ || !bio) {
      BIO_free(bio);
      failed_ = std::error_code(static_cast<int>(ERR_get_error()), tls_category());
      return;
    }
    BIO_set_data(bio, &bio_state_);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_, bio, bio);
    if (accepting) SSL_set_accept_state(ssl_);
    else SSL_set_connect_state(ssl_);
  }
  ~TlsStream() override {
    close();
    SSL_free(ssl_);
  }

  void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) override {
    if (handshaking())
      return after_handshake(false, [this, buffers = std::move(buffers), handler = std::move(handler)](
                                        std::error_code ec) mutable {
        if (ec) return handler(ec, 0);
        transfer(std::move(buffers), 0, std::move(handler), false);
      });
    transfer(std::move(buffers), 0, std::move(handler), true);
  }
  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) override {
    if (handshaking()) return 0;  // the handshake's driver alone touches the SSL object until done
    bool want_read = false;
    return write_some(buffers, 0, ec, want_read);
  }
  void try_write_now(const void* data, std::size_t size) override {
    std::lock_guard lock(mu_);
    if (failed_ || bio_state_.fd < 0 || pending_write_ || !SSL_is_init_finished(ssl_)) return;
    ERR_clear_error();
    SSL_write(ssl_, data, static_cast<int>(size));  // best effort (CLOSE)
    ERR_clear_error();
  }

  std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                       std::error_code& ec) override {
    if (handshaking()) return 0;
    std::size_t total = 0;
    for (const auto& b : buffers) {
      if (skip >= b.size()) {
        skip -= b.size();
        continue;
      }
      char* at = static_cast<char*>(b.data()) + skip;
      std::size_t left = b.size() - skip;
      skip = 0;
      while (left > 0) {
        const int n = ssl_call([&] { return SSL_read(ssl_, at, static_cast<int>(std::min<std::size_t>(left, INT_MAX))); },
                               ec, true);
        if (n <= 0) return total;
        total += static_cast<std::size_t>(n);
        at += n;
        left -= static_cast<std::size_t>(n);
      }
    }
    return total;
  }
  std::size_t try_peek(void* data, std::size_t size, std::error_code& ec) override {
    if (handshaking()) return 0;
    const int n = ssl_call([&] { return SSL_peek(ssl_, data, static_cast<int>(std::min<std::size_t>(size, INT_MAX))); }, ec,
                             true);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

  void async_wait_readable(std::function<void(std::error_code)> handler) override {
    // After the handshake the reader reads (a failed one's error too: try_read names it).
    if (handshaking())
      return after_handshake(true, [handler = std::move(handler)](std::error_code ec) {
        handler(ec == asio::error::operation_aborted ? ec : std::error_code());
      });
    if (decrypted_waiting()) return asio::post(executor_, [handler = std::move(handler)] { handler({}); });
    watch(read_watch_, asio::posix::stream_descriptor::wait_read, std::move(handler));
  }
  void stop_waiting_readable() override {
    read_watch_.reset();
    abort_waiters(true);
  }

  Prepared prepare_wait(std::vector<pollfd>& fds) override {
    // Bytes OpenSSL already decrypted are not on the socket any more.
    if (decrypted_waiting()) return Prepared::kReadable;
    fds.push_back({bio_state_.fd, POLLIN, 0});
    return Prepared::kPolling;
  }

  void shutdown(bool keep_receiving) override {
    read_watch_.reset();
    write_watch_.reset();
    handshake_watch_.reset();
    abort_waiters(false);
    std::lock_guard lock(mu_);
    if (bio_state_.fd >= 0) ::shutdown(bio_state_.fd, keep_receiving ? SHUT_WR : SHUT_RDWR);
  }
  void close() override { end(false, {}); }
  // (No TLS close_notify: a write may stand half done. The peer has read our CLOSE frame
  // before the end of stream, which is all it needs.)
  void close_gracefully(std::chrono::steady_clock::duration linger) override { end(true, linger); }
  std::string describe() const override { return description_; }
  std::uint64_t send_bound_bytes() const override { return queue_bound_ ? queue_bound_->bytes() : 0; }
  Traits traits() const override {
    Traits t;
    t.name = "tls";
    return t;
  }
  std::string peer_host() const override { return remote_host_of(description_); }

  std::optional<std::string> peer_name_problem(std::string_view node_id) const override {
    std::lock_guard lock(mu_);
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (!cert) return "it presented no TLS certificate";
    const unsigned flags = X509_CHECK_FLAG_ALWAYS_CHECK_SUBJECT | X509_CHECK_FLAG_NO_WILDCARDS;
    if (X509_check_host(cert, node_id.data(), node_id.size(), flags, nullptr) == 1) return std::nullopt;
    char cn[256] = "";
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    return "its TLS certificate (subject CN '" + std::string(cn) + "') does not name node '" + std::string(node_id) +
           "' in its CN or a DNS subjectAltName";
  }

 private:
  // ---- the handshake ----
  // One driver (SSL_do_handshake on the loop) runs it; reads and writes wait for it. Were a
  // write and a read each to drive it and wait for the socket on their own, one could take
  // the server's reply from the socket while the other waits for it to be readable: that
  // wait is never woken (nothing more comes until the dialer's HELLO is written).

  bool handshaking() {
    std::lock_guard lock(mu_);
    return !handshake_done_ && !failed_;
  }

  // Loop: runs then(ec) once the handshake is done (ec empty) or failed; `reading` marks a
  // wait for readable, which stop_waiting_readable ends. The driver starts from a wait for
  // writable, at once on a new socket: never inside this call, and close() cancels it.
  void after_handshake(bool reading, std::function<void(std::error_code)> then) {
    waiters_.push_back({reading, std::move(then)});
    if (!handshake_watch_) drive_handshake_when(asio::posix::stream_descriptor::wait_write);
  }

  void drive_handshake_when(asio::posix::stream_descriptor::wait_type what) {
    if (std::error_code ec = watch_duplicate(handshake_watch_, executor_, bio_state_.fd)) return finish_handshake(ec);
    handshake_watch_->async_wait(what, [this](std::error_code ec) {
      if (ec == asio::error::operation_aborted) return;  // closed: close() ended the waiters; may be gone
      if (ec) return finish_handshake(ec);
      bool want_read = false;
      ssl_call([&] { return SSL_do_handshake(ssl_); }, ec, false, &want_read);
      {
        std::lock_guard lock(mu_);
        handshake_done_ = SSL_is_init_finished(ssl_) && !failed_;
      }
      if (ec || !handshaking()) return finish_handshake(ec);
      drive_handshake_when(want_read ? asio::posix::stream_descriptor::wait_read
                                     : asio::posix::stream_descriptor::wait_write);
    });
  }

  void finish_handshake(std::error_code ec) {
    handshake_watch_.reset();
    for (auto& w : std::exchange(waiters_, {}))
      asio::post(executor_, [then = std::move(w.then), ec] { then(ec); });
  }

  // Ends the waiters (only those for readable if reads_only) with operation_aborted.
  void abort_waiters(bool reads_only) {
    auto kept = std::stable_partition(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return reads_only && !w.reading; });
    for (auto it = kept; it != waiters_.end(); ++it)
      asio::post(executor_, [then = std::move(it->then)] { then(asio::error::operation_aborted); });
    waiters_.erase(kept, waiters_.end());
  }

  // ---- reads and writes ----

  // Whether a read would find something without the socket: decrypted bytes, or (read
  // ahead) whole records OpenSSL took from the socket but has not opened yet. After a read
  // that wanted more, what OpenSSL holds is part of a record: only the socket can complete it.
  bool decrypted_waiting() {
    std::lock_guard lock(mu_);
    return failed_.has_value() || SSL_pending(ssl_) > 0 || (!starved_ && SSL_has_pending(ssl_));
  }

  // One SSL call under mu_: its result if > 0; else 0, with ec set if the stream failed (a
  // failure is sticky) and *want_read saying whether it waits for the socket to be readable.
  template <class Call>
  int ssl_call(Call call, std::error_code& ec, bool reading, bool* want_read = nullptr) {
    std::lock_guard lock(mu_);
    if (failed_) {
      ec = *failed_;
      return 0;
    }
    if (bio_state_.fd < 0) {
      ec = asio::error::bad_descriptor;
      return 0;
    }
    ERR_clear_error();
    const int n = call();
    if (n > 0) {
      if (reading) starved_ = false;
      return n;
    }
    const int error = SSL_get_error(ssl_, n);
    if (reading) starved_ = error == SSL_ERROR_WANT_READ;
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      // (A read that waits for a write happens only if the socket's send buffer cannot take
      // a handshake message, far larger than any: the reader then retries when data comes.)
      if (want_read) *want_read = error == SSL_ERROR_WANT_READ;
      return 0;
    }
    ec = classify(error);
    failed_ = ec;
    if (ec == std::error_code(kPlainPeer, tls_category())) {
      // A plain peer reads this TLS alert (fatal, protocol_version) as a bad frame header,
      // which its frame reader recognises: both sides then say what is wrong.
      static const unsigned char kAlert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46};
      ::send(bio_state_.fd, kAlert, sizeof kAlert, MSG_DONTWAIT | MSG_NOSIGNAL);
      // The rest of its HELLO is read and dropped: closing a socket with unread bytes resets
      // the connection, and the peer could lose the alert.
      char drop[4096];
      while (::recv(bio_state_.fd, drop, sizeof drop, MSG_DONTWAIT) > 0) {
      }
    }
    ERR_clear_error();
    return 0;
  }

  std::error_code classify(int error) const {
    const bool handshaking = !SSL_is_init_finished(ssl_);
    const bool plain_peer = bio_state_.first_size == 4 && std::memcmp(bio_state_.first, "COMM", 4) == 0;
    if (handshaking && plain_peer) return {kPlainPeer, tls_category()};
    if (error == SSL_ERROR_ZERO_RETURN)
      return handshaking ? std::error_code(kClosedInHandshake, tls_category()) : std::error_code(asio::error::eof);
    if (error == SSL_ERROR_SYSCALL) {
      if (bio_state_.last_errno) return {bio_state_.last_errno, asio::error::get_system_category()};
      return handshaking ? std::error_code(kClosedInHandshake, tls_category()) : std::error_code(asio::error::eof);
    }
    const long verify = SSL_get_verify_result(ssl_);
    if (handshaking && verify != X509_V_OK) return {kVerifyBase + static_cast<int>(verify), tls_category()};
    const unsigned long e = ERR_peek_last_error();
    if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
      return handshaking ? std::error_code(kClosedInHandshake, tls_category()) : std::error_code(asio::error::eof);
    return {static_cast<int>(ERR_PACK(ERR_GET_LIB(e), 0, ERR_GET_REASON(e))), tls_category()};
  }

  // The next bytes to hand SSL_write, from stream offset `at` of buffers: a large buffer's
  // remainder in place, else up to one record gathered into scratch_ (a 37-byte header and a
  // small manifest then travel in one record with the start of the payload). Deterministic in
  // the bytes left, so a write retried after WANT_WRITE offers at least as much as before.
  std::pair<const void*, std::size_t> next_chunk(const std::vector<asio::const_buffer>& buffers, std::size_t at) {
    std::size_t i = 0;
    for (; i < buffers.size() && at >= buffers[i].size(); ++i) at -= buffers[i].size();
    if (i == buffers.size()) return {nullptr, 0};
    const std::size_t left = buffers[i].size() - at;
    if (left >= kRecord) return {static_cast<const char*>(buffers[i].data()) + at, std::min<std::size_t>(left, INT_MAX)};
    std::size_t n = 0;
    for (; i < buffers.size() && n < kRecord; ++i, at = 0) {
      const std::size_t take = std::min(buffers[i].size() - at, kRecord - n);
      std::memcpy(scratch_ + n, static_cast<const char*>(buffers[i].data()) + at, take);
      n += take;
    }
    return {scratch_, n};
  }

  // Writes what the socket takes now from stream offset skip; returns how many bytes.
  std::size_t write_some(const std::vector<asio::const_buffer>& buffers, std::size_t skip, std::error_code& ec,
                         bool& want_read) {
    std::size_t total = 0;
    while (!ec) {
      const auto [data, size] = next_chunk(buffers, skip + total);
      if (size == 0) break;
      bool wants_read = false;
      const int n = ssl_call([&, data = data, size = size] { return SSL_write(ssl_, data, static_cast<int>(size)); },
                             ec, false, &wants_read);
      if (n <= 0) {
        // OpenSSL keeps the record it could not send and sends it on the next SSL_write.
        std::lock_guard lock(mu_);
        pending_write_ = !ec;
        want_read = wants_read;
        break;
      }
      std::lock_guard lock(mu_);
      pending_write_ = false;
      total += static_cast<std::size_t>(n);
    }
    return total;
  }

  // Loop: writes what the socket takes; if not all, waits for the socket and goes on. Like
  // asio's operations, the handler never runs inside the call that started it.
  void transfer(std::vector<asio::const_buffer> buffers, std::size_t done, IoHandler handler, bool first) {
    std::error_code ec;
    bool want_read = false;
    done += write_some(buffers, done, ec, want_read);
    if (ec || done == asio::buffer_size(buffers)) {
      hand_over(done);  // SSL_write took it whole into the socket: in the kernel now
      if (!first) write_watch_.reset();
      if (!first) return handler(ec, done);
      return asio::post(executor_, [handler = std::move(handler), ec, done] { handler(ec, done); });
    }
    if (queue_bound_ && !want_read) queue_bound_->on_write_blocked(bio_state_.fd);  // full, with more to write
    // During the handshake a write may wait for the peer's reply rather than for room.
    watch(write_watch_, want_read ? asio::posix::stream_descriptor::wait_read : asio::posix::stream_descriptor::wait_write,
          [this, buffers = std::move(buffers), done, handler = std::move(handler)](std::error_code ec) mutable {
            if (ec) return handler(ec, done);  // cancelled by close(): the stream may be gone
            transfer(std::move(buffers), done, std::move(handler), false);
          });
  }

  // Loop: waits on a duplicate of the descriptor, registered only while waiting
  // (watch_duplicate).
  void watch(std::optional<asio::posix::stream_descriptor>& watcher, asio::posix::stream_descriptor::wait_type what,
             std::function<void(std::error_code)> handler) {
    if (std::error_code ec = watch_duplicate(watcher, executor_, bio_state_.fd))
      return asio::post(executor_, [handler = std::move(handler), ec] { handler(ec); });
    watcher->async_wait(what, std::move(handler));
  }

  void end(bool lingering, std::chrono::steady_clock::duration linger) {
    read_watch_.reset();
    write_watch_.reset();
    handshake_watch_.reset();
    abort_waiters(false);
    std::lock_guard lock(mu_);
    if (bio_state_.fd < 0) return;
    if (lingering) {
      close_lingering(executor_, bio_state_.fd, linger);
    } else {
      ::shutdown(bio_state_.fd, SHUT_RDWR);
      ::close(bio_state_.fd);
    }
    bio_state_.fd = -1;
  }

  asio::any_io_executor executor_;
  std::shared_ptr<const TlsContext> context_;
  std::string description_;
  mutable std::mutex mu_;  // every SSL call, bio_state_, failed_, pending_write_, handshake_done_
  SSL* ssl_ = nullptr;
  SocketBio bio_state_;
  std::optional<std::error_code> failed_;
  bool pending_write_ = false;  // OpenSSL holds a record that the socket did not take yet
  bool starved_ = false;        // the last read wanted more from the socket
  bool handshake_done_ = false;
  struct Waiter {
    bool reading;
    std::function<void(std::error_code)> then;
  };
  std::vector<Waiter> waiters_;                                   // loop only: for the handshake
  std::optional<asio::posix::stream_descriptor> handshake_watch_;  // loop only
  char scratch_[kRecord];       // the writer's (one writer at a time)
  std::optional<asio::posix::stream_descriptor> read_watch_, write_watch_;  // loop only
  std::optional<SendQueueBound> queue_bound_;                               // the writer's
};

}  // namespace

const std::error_category& tls_category() {
  static const TlsCategory category;
  return category;
}

std::unique_ptr<Connection> make_tls_stream(asio::any_io_executor executor, int fd, std::string description,
                                            std::shared_ptr<const TlsContext> context, bool accepting,
                                            std::chrono::microseconds queue_target) {
  return std::make_unique<TlsStream>(std::move(executor), fd, std::move(description), std::move(context), accepting,
                                     queue_target);
}

}  // namespace wcomm::transport
