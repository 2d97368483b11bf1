// The Future's calls into the operation behind it (wcomm/future.h, core/operation.h).
#include "core/operation.h"

namespace wcomm::detail {

void cancel(Operation& operation) { operation.cancel(); }
void help(Operation& operation, std::chrono::steady_clock::time_point deadline) { operation.help(deadline); }
void callback_set(Operation& operation) { operation.callback_set(); }
void wake(Waker& waker) { waker.wake(); }

}  // namespace wcomm::detail
