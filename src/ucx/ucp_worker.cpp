// UcpWorker: context and worker creation, and a tidy destruction.
#include "ucx/ucp_worker.h"

#include <chrono>

namespace wcomm::ucp {

std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

UcpWorker::UcpWorker(std::uint64_t features) {
  ucp_config_t* cfg = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &cfg);
  if (s != UCS_OK) {
    error_ = "ucp_config_read: " + status_text(s);
    return;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = features | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  s = ucp_init(&params, cfg, &context_);
  ucp_config_release(cfg);
  if (s != UCS_OK) {
    context_ = nullptr;
    error_ = "ucp_init: " + status_text(s);
    return;
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  s = ucp_worker_create(context_, &wp, &worker_);
  if (s != UCS_OK) {
    worker_ = nullptr;
    error_ = "ucp_worker_create: " + status_text(s);
    return;
  }
  ucp_address_t* addr = nullptr;
  std::size_t len = 0;
  s = ucp_worker_get_address(worker_, &addr, &len);
  if (s != UCS_OK) {
    error_ = "ucp_worker_get_address: " + status_text(s);
    return;
  }
  address_.assign(reinterpret_cast<const char*>(addr), len);
  ucp_worker_release_address(worker_, addr);
  s = ucp_worker_get_efd(worker_, &event_fd_);
  if (s != UCS_OK) error_ = "ucp_worker_get_efd: " + status_text(s);
}

void UcpWorker::settle() {
  settled_ = true;
  if (!worker_) return;
  // UCX 1.13 asserts ("got REP message") when it purges a pending wireup reply at
  // ucp_worker_destroy. A reply may wait for its connection, hence the quiet period.
  const auto start = std::chrono::steady_clock::now();
  auto last_work = start;
  for (auto now = start; now - last_work < std::chrono::milliseconds(20) && now - start < std::chrono::milliseconds(300);
       now = std::chrono::steady_clock::now())
    if (ucp_worker_progress(worker_)) last_work = now;
}

UcpWorker::~UcpWorker() {
  if (worker_) {
    if (!settled_) settle();
    ucp_worker_destroy(worker_);
  }
  if (context_) ucp_cleanup(context_);
}

}  // namespace wcomm::ucp
