// One UCP context with one worker that can sleep on its event fd: the UCX set-up that the ucx
// transport (src/transport/ucx) and the transfer engine's ucx backend (src/transfer) share.
#pragma once

#include <cstdint>
#include <string>

#include <ucp/api/ucp.h>

namespace wcomm::ucp {

std::string status_text(ucs_status_t status);  // UCX's words for a status

class UcpWorker {
 public:
  // features: the UCP_FEATURE_* bits the user needs (UCP_FEATURE_WAKEUP is added). The worker
  // is UCS_THREAD_MODE_SERIALIZED: its user serialises every call on it with a mutex. On
  // failure, error() says which step failed and why.
  explicit UcpWorker(std::uint64_t features);
  // Settles (unless settle() did), then destroys the worker.
  ~UcpWorker();
  // Lets wire-up messages still in flight go out: progresses until nothing happened for 20 ms,
  // 300 ms at most. The caller holds what serialises calls on the worker.
  void settle();
  UcpWorker(const UcpWorker&) = delete;
  UcpWorker& operator=(const UcpWorker&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  int event_fd() const { return event_fd_; }  // owned by UCX; readable after ucp_worker_arm
  const std::string& address() const { return address_; }  // the packed worker address

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::string address_;
  std::string error_;
  bool settled_ = false;
};

}  // namespace wcomm::ucp
