// The registration cache: the ranges a user registered (each kept, so deregister takes back
// exactly one) and the merged, non-overlapping regions backends actually register.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wcomm/xfer/types.h"

namespace wcomm::xfer {

struct Range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;  // one past the last byte
  friend bool operator==(const Range&, const Range&) = default;
  friend auto operator<=>(const Range&, const Range&) = default;
};

// What a change did to the merged regions: the backends deregister `removed` and register
// `added` (a region that grew is one removed and one added).
struct RegionChange {
  std::vector<Range> removed;
  std::vector<Range> added;
};

class RegistrationCache {
 public:
  // Adds a user range; touching or overlapping regions merge with it.
  RegionChange add(Range range);
  // Takes back one earlier add of exactly this range; nullopt when there was none.
  std::optional<RegionChange> remove(Range range);
  // The merged region holding all of [begin, end), if any.
  std::optional<Range> find(std::uint64_t begin, std::uint64_t end) const;
  std::vector<Range> regions() const;

 private:
  std::map<Range, int> user_;            // every user range, with how many times it was added
  std::map<std::uint64_t, Range> merged_;  // merged regions by begin
};

}  // namespace wcomm::xfer
