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
  // Non-blocking scatter read from any thread (one reader at a time, no async_read
  // outstanding): fills buffers, skipping their first `skip` bytes, with what the kernel has
  // now, and returns how many bytes that was. ec is asio::error::eof at the end of the stream.
  virtual std::size_t try_read(const std::vector<asio::mutable_buffer>& buffers, std::size_t skip,
                               std::error_code& ec) = 0;
  // Copies up to size bytes that are waiting, without consuming them (non-blocking; ec as
  // for try_read).
  virtual std::size_t try_peek(void* data, std::size_t size, std::error_code& ec) = 0;
  // Calls handler (loop thread) once the stream has bytes to read, has ended or has failed:
  // at once if bytes are already waiting. Consumes nothing.
  virtual void async_wait_readable(std::function<void(std::error_code)> handler) = 0;
  // Cancels async_wait_readable (its handler sees operation_aborted) and stops watching the
  // stream, so that arriving bytes do not wake the loop while another thread reads them.
  virtual void stop_waiting_readable() = 0;
  // The descriptor a thread may poll() for readability while it reads with try_read.
  virtual int native_handle() = 0;
  // Ends both directions and cancels outstanding operations, without releasing the
  // descriptor: a thread polling it wakes up. Loop thread.
  virtual void shutdown() = 0;
  // Cancels outstanding operations (their handlers see asio::error::operation_aborted).
  virtual void close() = 0;
  virtual std::string describe() const = 0;  // "tcp 127.0.0.1:40000 -> 127.0.0.1:9000"
};

}  // namespace wcomm::transport
