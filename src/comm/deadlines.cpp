#include "comm/deadlines.h"

namespace wcomm {

bool DeadlineList::keep(CommOperation& op) {
  if (op.deadline == Clock::time_point::max()) return false;
  op.deadline_entry = entries_.emplace(op.deadline, &op);
  op.has_deadline_entry = true;
  if (op.deadline >= armed_for_) return false;
  armed_for_ = op.deadline;
  return true;
}

void DeadlineList::forget(CommOperation& op) {
  if (!op.has_deadline_entry) return;
  entries_.erase(op.deadline_entry);
  op.has_deadline_entry = false;
}

CommOperation* DeadlineList::pop_due(Clock::time_point now) {
  if (entries_.empty() || entries_.begin()->first > now) return nullptr;
  CommOperation* due = entries_.begin()->second;
  forget(*due);
  return due;
}

DeadlineList::Clock::time_point DeadlineList::rearm() {
  armed_for_ = entries_.empty() ? Clock::time_point::max() : entries_.begin()->first;
  return armed_for_;
}

void DeadlineTimer::arm_for(Clock::time_point at) {
  if (stopped_ || at >= armed_for_) return;
  armed_for_ = at;
  if (!timer_) timer_.emplace(io_);
  timer_->expires_at(at);  // (a wait armed for later ends with operation_aborted)
  timer_->async_wait([this](std::error_code ec) {
    if (ec || stopped_) return;
    armed_for_ = Clock::time_point::max();
    arm_for(expire_());
  });
}

void DeadlineTimer::stop() {
  stopped_ = true;
  timer_.reset();
}

}  // namespace wcomm
