// UcxConnection: writes go straight to UCX from the caller's memory (async_write) or from a
// copy (try_write, small frames only); reads copy out of the Channel's received messages.
#include "transport/ucx/ucx_connection.h"

#include <poll.h>

#include <cstring>
#include <optional>

#include "transport/socket_stream.h"
#include "transport/thread_waker.h"

namespace wcomm::transport::ucx {
namespace {

// try_write copies at most this much (more goes by async_write, from the caller's memory).
constexpr std::size_t kMaxCopiedWrite = 256u << 10;

class UcxConnection final : public Connection {
 public:
  UcxConnection(std::shared_ptr<Hub> hub, std::shared_ptr<Channel> channel, std::string description)
      : hub_(std::move(hub)), channel_(std::move(channel)), description_(std::move(description)) {}
  ~UcxConnection() override { close(); }

  void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) override {
    auto op = std::make_unique<SendOp>();
    op->channel = channel_;
    op->user_memory = true;
    for (const auto& b : buffers)
      if (b.size() > 0) op->iov.push_back({const_cast<void*>(b.data()), b.size()}), op->bytes += b.size();
    op->handler = std::move(handler);
    if (shut_ || op->bytes == 0) return Hub::complete(*op, shut_ ? asio::error::operation_aborted : std::error_code());
    {
      std::lock_guard lock(hub_->mu);
      hub_->send(std::move(op));
    }
    hub_->wake();
  }

  std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) override {
    if (shut_) {
      ec = asio::error::broken_pipe;
      return 0;
    }
    if (std::error_code failure = channel_->failure()) {
      ec = failure;
      return 0;
    }
    const std::size_t total = asio::buffer_size(buffers);
    if (total == 0 || total > kMaxCopiedWrite) return 0;
    return send_copy(buffers, total, true) ? total : 0;
  }

  void try_write_now(const void* data, std::size_t size) override {
    if (shut_ || size == 0) return;
    send_copy({asio::buffer(data, size)}, size, false);  // small (CLOSE): past the window
  }

  std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                       std::error_code& ec) override {
    const std::uint64_t before = channel_->bytes_read();
    const std::size_t n = channel_->read(buffers, skip, true, ec);
    // A credit is due: the progress thread sends it (and the peer's writes may go on).
    if (n > 0 && (before + n) / kCreditStep != before / kCreditStep) hub_->wake();
    return n;
  }
  std::size_t try_peek(void* data, std::size_t size, std::error_code& ec) override {
    return channel_->read({asio::buffer(data, size)}, 0, false, ec);
  }

  void async_wait_readable(std::function<void(std::error_code)> handler) override {
    if (channel_->readable()) return asio::post(channel_->executor, [handler = std::move(handler)] { handler({}); });
    // Watched only while waiting (a fresh registration sees a signal already raised).
    if (std::error_code ec = watch_duplicate(watch_, channel_->executor, channel_->readable_fd()))
      return asio::post(channel_->executor, [handler = std::move(handler), ec] { handler(ec); });
    watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                       [this, handler = std::move(handler)](std::error_code ec) {
                         if (!ec) watch_.reset();  // cancelled: this connection may be gone
                         handler(ec);
                       });
  }
  void stop_waiting_readable() override { watch_.reset(); }

  Prepared prepare_wait(std::vector<pollfd>& fds) override {
    if (channel_->readable()) return Prepared::kReadable;
    fds.push_back({channel_->readable_fd(), POLLIN, 0});
    return Prepared::kPolling;
  }

  void shutdown(bool /*keep_receiving*/) override {  // (no lingering end here)
    if (shut_.exchange(true)) return;
    channel_->mark_shut();  // wakes any waiter
    {
      // An orderly end (END, acknowledged); forced while the caller's memory is being sent,
      // which cancels those writes (operation_aborted).
      std::lock_guard lock(hub_->mu);
      hub_->end_gracefully(*channel_);
    }
    hub_->wake();
    if (watch_) {
      std::error_code ignored;
      watch_->cancel(ignored);
    }
  }
  void close() override {
    shutdown(false);
    watch_.reset();
    // The channel lingers in the hub until the peer acknowledges the end. Both stay held
    // until this object goes (a late reader finds a shut channel, never a freed one); the hub
    // goes with the process's last ucx connection or listener.
  }
  std::string describe() const override { return description_; }
  Traits traits() const override {
    Traits t;
    t.name = "ucx";
    return t;
  }
  std::string peer_host() const override { return remote_host_of(description_); }

 private:
  // False (nothing sent) when windowed and the window is closed.
  bool send_copy(const std::vector<asio::const_buffer>& buffers, std::size_t total, bool windowed) {
    auto op = std::make_unique<SendOp>();
    op->channel = channel_;
    op->copy.reset(new std::uint8_t[total]);
    op->bytes = total;
    std::size_t at = 0;
    for (const auto& b : buffers) {
      std::memcpy(op->copy.get() + at, b.data(), b.size());
      at += b.size();
    }
    op->iov.push_back({op->copy.get(), total});
    {
      std::lock_guard lock(hub_->mu);
      if (windowed && !channel_->window_open()) return false;
      hub_->send(std::move(op));
    }
    hub_->wake();
    return true;
  }

  std::shared_ptr<Hub> hub_;
  std::shared_ptr<Channel> channel_;
  std::string description_;
  std::atomic<bool> shut_{false};
  std::optional<asio::posix::stream_descriptor> watch_;
};

}  // namespace

std::unique_ptr<Connection> make_connection(std::shared_ptr<Hub> hub, std::shared_ptr<Channel> channel,
                                            std::string description) {
  return std::make_unique<UcxConnection>(std::move(hub), std::move(channel), std::move(description));
}

}  // namespace wcomm::transport::ucx
