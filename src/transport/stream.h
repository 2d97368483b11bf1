// Byte streams: the small interface every transport implements (TCP today; IPC and shared
// memory join by implementing it). A stream moves bytes and nothing else: framing and the
// codec live above it, in comm.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <asio.hpp>

namespace wcomm::transport {

using IoHandler = std::function<void(std::error_code, std::size_t)>;

class Stream {
 public:
  virtual ~Stream() = default;
  // Reads until every buffer is full (or an error). One read may be outstanding.
  virtual void async_read(std::vector<asio::mutable_buffer> buffers, IoHandler handler) = 0;
  // Writes every byte of buffers as one gather write (or fails). One write may be outstanding.
  virtual void async_write(std::vector<asio::const_buffer> buffers, IoHandler handler) = 0;
  // Non-blocking gather write from any thread, with no async_write outstanding: writes what
  // the kernel takes now and returns how many bytes that was (ec set on a broken stream).
  virtual std::size_t try_write(const std::vector<asio::const_buffer>& buffers, std::error_code& ec) = 0;
  // Best-effort non-blocking write of a small frame (CLOSE) with nothing else outstanding.
  virtual void try_write_now(const void* data, std::size_t size) = 0;
  // Cancels outstanding operations (their handlers see asio::error::operation_aborted).
  virtual void close() = 0;
  virtual std::string describe() const = 0;  // "tcp 127.0.0.1:40000 -> 127.0.0.1:9000"
};

}  // namespace wcomm::transport
