// The registration cache: merged regions are recomputed from the user ranges that touch the
// changed span, so overlapping registrations never reach a backend twice.
#include "transfer/registration_cache.h"

#include <algorithm>

namespace wcomm::xfer {

namespace {
// Merges sorted ranges that overlap or touch.
std::vector<Range> coalesce(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> out;
  for (const Range& r : ranges) {
    if (!out.empty() && r.begin <= out.back().end) out.back().end = std::max(out.back().end, r.end);
    else out.push_back(r);
  }
  return out;
}
}  // namespace

RegionChange RegistrationCache::add(Range range) {
  RegionChange change;
  ++user_[range];
  // Every merged region that touches the new range goes; one region covering them comes.
  Range grown = range;
  for (auto it = merged_.begin(); it != merged_.end();) {
    const Range& r = it->second;
    if (r.end >= range.begin && r.begin <= range.end) {
      if (r.begin <= range.begin && r.end >= range.end) return change;  // already covered
      grown.begin = std::min(grown.begin, r.begin);
      grown.end = std::max(grown.end, r.end);
      change.removed.push_back(r);
      it = merged_.erase(it);
    } else {
      ++it;
    }
  }
  merged_[grown.begin] = grown;
  change.added.push_back(grown);
  return change;
}

std::optional<RegionChange> RegistrationCache::remove(Range range) {
  auto it = user_.find(range);
  if (it == user_.end()) return std::nullopt;
  if (--it->second == 0) user_.erase(it);
  auto holder = find(range.begin, range.end);
  RegionChange change;
  // Rebuild the one merged region that held the range from the user ranges still inside it.
  std::vector<Range> inside;
  for (const auto& [r, count] : user_)
    if (r.begin >= holder->begin && r.end <= holder->end) inside.push_back(r);
  std::vector<Range> rebuilt = coalesce(inside);
  if (rebuilt.size() == 1 && rebuilt[0] == *holder) return change;  // still needed whole
  merged_.erase(holder->begin);
  change.removed.push_back(*holder);
  for (const Range& r : rebuilt) {
    merged_[r.begin] = r;
    change.added.push_back(r);
  }
  return change;
}

std::optional<Range> RegistrationCache::find(std::uint64_t begin, std::uint64_t end) const {
  auto it = merged_.upper_bound(begin);
  if (it == merged_.begin()) return std::nullopt;
  --it;
  if (it->second.begin <= begin && end <= it->second.end) return it->second;
  return std::nullopt;
}

std::vector<Range> RegistrationCache::regions() const {
  std::vector<Range> out;
  for (const auto& [begin, r] : merged_) out.push_back(r);
  return out;
}

}  // namespace wcomm::xfer
