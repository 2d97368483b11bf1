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
  // wcomm: what ring_allreduce computes (V0.1: xor on bytes) and how: auto / ring /
  // recursive_doubling run wcomm::Group's allreduce (the library's algorithm and transport);
  // "v01" runs V0.1's ring with its tags, which a V0.1 rank needs (the initiator falls back
  // to it when the responder turns out to be V0.1's, docs/collectives.md).
  std::string reduce = "xor";
  std::string dtype = "uint8";
  std::string algorithm = "auto";

  // V0.1's W-independent rules, with its messages; throws InvalidArgumentError.
  void validate() const;
  // The W-dependent rules (run after start / ready).
  void validate_for_world(int world) const;
  bool v01_compatible() const { return v01_expressible() && algorithm == "v01"; }  // V0.1's run exactly
  bool v01_expressible() const { return reduce == "xor" && dtype == "uint8"; }     // what a V0.1 rank computes

  // The `start` message's settings (V0.1's encoding; wcomm's keys only when not V0.1's defaults,
  // so a V0.1 responder sees exactly what it expects).
  Value to_value() const;
  static MultirankSettings from_value(const Value& value);  // validates

  // The start / ready exchange. The responder's `ready`: V0.1's exactly for a V0.1 initiator
  // (its start message named no algorithm: from_value made it "v01"), else naming the
  // algorithm it will run. The initiator's side, agree_with(ready): a plain `ready` comes from
  // a V0.1 responder, which runs V0.1's ring whatever the start message said, so the ranks here
  // do too (true: the algorithm became "v01") if V0.1 computes what was asked (xor on bytes),
  // else ProtocolError saying so; a wcomm responder must name this side's algorithm.
  Value ready_message() const;
  bool agree_with(const Value& ready);
  nlohmann::json to_json() const;  // the report's `settings`
};

}  // namespace wcomm::tools
