// `wcomm multirank` settings: V0.1's eight (v01-collectives-cluster.md 1.3) plus wcomm's reduce,
// dtype and algorithm; their checks, and their form in the `start` control message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wcomm/collectives/group.h"
#include "wcomm/value.h"

namespace wcomm::tools {

// V0.1's tag bases (wire-v1) and the control tag.
inline constexpr std::uint32_t kControlTag = 0xFFF00000u;
std::uint32_t collective_tag_base(const std::string& collective);  // 0 for an unknown name

struct MultirankSettings {
  std::vector<std::int64_t> payload_sizes = {1024, 65536, 1048576};
  std::int64_t rounds = 20;
  std::int64_t warmup_rounds = 3;
  std::vector<std::string> collectives = {"barrier", "broadcast", "allgather", "ring_allreduce"};
  double timeout = 120.0;
  std::int64_t broadcast_root = 0;
  std::optional<std::int64_t> ring_exchange_concurrency;
  std::optional<std::int64_t> allreduce_block_bytes;
  // wcomm: what ring_allreduce computes (V0.1: xor on bytes) and how ("v01": V0.1's ring with
  // its tags, interoperable with V0.1 ranks; auto / ring / recursive_doubling: wcomm::Group).
  std::string reduce = "xor";
  std::string dtype = "uint8";
  std::string algorithm = "v01";

  // V0.1's W-independent rules, with its messages; throws InvalidArgumentError.
  void validate() const;
  // The W-dependent rules (run after start / ready).
  void validate_for_world(int world) const;
  bool v01_compatible() const { return reduce == "xor" && dtype == "uint8" && algorithm == "v01"; }

  // The `start` message's settings (V0.1's encoding; wcomm's keys only when not V0.1's defaults,
  // so a V0.1 responder sees exactly what it expects).
  Value to_value() const;
  static MultirankSettings from_value(const Value& value);  // validates
  nlohmann::json to_json() const;  // the report's `settings`
};

}  // namespace wcomm::tools
