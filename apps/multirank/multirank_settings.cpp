// MultirankSettings: checks, and conversion to the start message and the report.
#include "multirank/multirank_settings.h"

#include <cmath>

#include "core/dict_fields.h"
#include "wcomm/errors.h"

namespace wcomm::tools {
namespace {

const std::vector<std::pair<std::string, std::uint32_t>> kBases = {
    {"barrier", 0x10000000u},       {"broadcast", 0x20000000u},     {"allgather", 0x30000000u},
    {"ring_allreduce", 0x40000000u}, {"ring_exchange", 0x50000000u}, {"all_to_all_exchange", 0x60000000u}};

[[noreturn]] void invalid_start(const std::string& reason) {
  throw InvalidArgumentError("invalid multi-rank start message: " + reason);
}

// A field of the start message, or InvalidArgumentError carrying the field's reason.
template <class T>
T required(Result<T> field) {
  if (!field.ok()) invalid_start(field.error().message);
  return std::move(field).value();
}

// An optional integer field: absent or None leaves `out` as it is.
template <class Int>
void optional_int(const Dict& d, const char* key, Int& out) {
  if (const Value* v = d.find(key); v && !v->is_none()) out = required(fields::int64(d, key));
}

std::vector<std::int64_t> payload_sizes_of(const Dict& d) {
  std::vector<std::int64_t> sizes;
  for (const Value& v : *required(fields::sequence(d, "payload_sizes"))) {
    if (!v.is<std::int64_t>()) invalid_start("a payload size is not an integer (it is " + fields::kind_of(v) + ")");
    sizes.push_back(v.as<std::int64_t>());
  }
  return sizes;
}

}  // namespace

std::uint32_t collective_tag_base(const std::string& collective) {
  for (auto& [name, base] : kBases)
    if (name == collective) return base;
  return 0;
}

void MultirankSettings::validate() const {
  if (payload_sizes.empty()) throw InvalidArgumentError("payload sizes must be positive");
  for (auto s : payload_sizes)
    if (s <= 0) throw InvalidArgumentError("payload sizes must be positive");
  if (rounds <= 0 || warmup_rounds < 0 || !(timeout > 0)) throw InvalidArgumentError("rounds and timeout must be positive");
  if (collectives.empty()) throw InvalidArgumentError("unknown collective");
  for (auto& c : collectives)
    if (!collective_tag_base(c)) throw InvalidArgumentError("unknown collective: " + c);
  if (broadcast_root < 0) throw InvalidArgumentError("broadcast root must be a non-negative rank");
  if (ring_exchange_concurrency && *ring_exchange_concurrency <= 0)
    throw InvalidArgumentError("ring exchange concurrency must be positive");
  if (allreduce_block_bytes && *allreduce_block_bytes <= 0)
    throw InvalidArgumentError("allreduce block size must be positive");
  auto op = parse_reduce_op(reduce);
  if (!op) throw InvalidArgumentError("unknown reduction '" + reduce + "': use sum, prod, min, max, xor, and or or");
  auto dt = parse_dtype(dtype);
  if (!dt || !reducible(*dt))
    throw InvalidArgumentError("unknown dtype '" + dtype +
                               "': use uint8, int8, int32, int64, float16, bfloat16, float32 or float64");
  if (algorithm != "v01" && !parse_algorithm(algorithm))
    throw InvalidArgumentError("unknown algorithm '" + algorithm + "': use v01, auto, ring or recursive_doubling");
}

void MultirankSettings::validate_for_world(int world) const {
  if (broadcast_root >= world) throw InvalidArgumentError("broadcast root must be smaller than world size");
  if (ring_exchange_concurrency && *ring_exchange_concurrency > world)
    throw InvalidArgumentError("ring exchange concurrency cannot exceed world size");
  bool allreduce = false;
  for (auto& c : collectives) allreduce |= c == "ring_allreduce";
  if (!allreduce) return;
  std::int64_t item = static_cast<std::int64_t>(dtype_itemsize(*parse_dtype(dtype)));
  for (auto size : payload_sizes) {
    if (size % (world * item) != 0)
      throw InvalidArgumentError("ring-allreduce payload sizes must be multiples of " + std::to_string(world * item) +
                                 " bytes" + (item > 1 ? " (world size x " + dtype + "'s " + std::to_string(item) + " bytes)" : ""));
    if (allreduce_block_bytes) {
      if (*allreduce_block_bytes % item != 0)
        throw InvalidArgumentError("allreduce block size must be a multiple of " + dtype + "'s size");
      std::int64_t shard = size / world;
      std::int64_t blocks = (shard + *allreduce_block_bytes - 1) / *allreduce_block_bytes;
      if (blocks * 2 * (world - 1) > 256) throw InvalidArgumentError("allreduce block size creates more than 256 protocol steps");
    }
  }
}

Value MultirankSettings::to_value() const {
  std::vector<Value> sizes(payload_sizes.begin(), payload_sizes.end());
  std::vector<Value> names(collectives.begin(), collectives.end());
  auto opt = [](const std::optional<std::int64_t>& v) { return v ? Value(*v) : Value(); };
  Dict d{{"payload_sizes", Tuple(std::move(sizes))},
         {"rounds", rounds},
         {"warmup_rounds", warmup_rounds},
         {"collectives", Tuple(std::move(names))},
         {"timeout", timeout},
         {"broadcast_root", broadcast_root},
         {"ring_exchange_concurrency", opt(ring_exchange_concurrency)},
         {"allreduce_block_bytes", opt(allreduce_block_bytes)}};
  if (!v01_compatible()) {
    d.items.emplace_back("reduce", reduce);
    d.items.emplace_back("dtype", dtype);
    d.items.emplace_back("algorithm", algorithm);
  }
  return d;
}

MultirankSettings MultirankSettings::from_value(const Value& value) {
  const Dict* d = value.get_if<Dict>();
  if (!d) throw InvalidArgumentError("invalid multi-rank start message");
  MultirankSettings s;
  s.payload_sizes = payload_sizes_of(*d);
  s.rounds = required(fields::int64(*d, "rounds"));
  s.warmup_rounds = required(fields::int64(*d, "warmup_rounds"));
  s.collectives.clear();
  for (const Value& v : *required(fields::sequence(*d, "collectives"))) {
    if (!v.is<std::string>()) throw InvalidArgumentError("unknown collective");
    s.collectives.push_back(v.as<std::string>());
  }
  s.timeout = required(fields::number(*d, "timeout"));
  optional_int(*d, "broadcast_root", s.broadcast_root);
  optional_int(*d, "ring_exchange_concurrency", s.ring_exchange_concurrency);
  optional_int(*d, "allreduce_block_bytes", s.allreduce_block_bytes);
  // Sent only when not V0.1 compatible: a V0.1 initiator's start message has none of them, and
  // its ranks run V0.1's ring.
  s.algorithm = "v01";
  for (auto [key, field] : {std::pair{"reduce", &s.reduce}, {"dtype", &s.dtype}, {"algorithm", &s.algorithm}})
    if (d->find(key)) *field = required(fields::string(*d, key));
  s.validate();
  return s;
}

Value MultirankSettings::ready_message() const {
  if (algorithm == "v01") return Dict{{"op", "ready"}};
  return Dict{{"op", "ready"}, {"algorithm", algorithm}};
}

bool MultirankSettings::agree_with(const Value& ready) {
  if (ready == Value(Dict{{"op", "ready"}})) {
    if (algorithm == "v01") return false;
    if (!v01_expressible())
      throw ProtocolError("the responder runs V0.1's multirank, which computes only --reduce xor --dtype uint8 (asked: "
                          "--reduce " + reduce + " --dtype " + dtype + ")");
    algorithm = "v01";
    return true;
  }
  if (ready == Value(Dict{{"op", "ready"}, {"algorithm", algorithm}})) return false;
  throw ProtocolError("remote ranks did not become ready");
}

nlohmann::json MultirankSettings::to_json() const {
  auto opt = [](const std::optional<std::int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"payload_sizes", payload_sizes},
          {"rounds", rounds},
          {"warmup_rounds", warmup_rounds},
          {"collectives", collectives},
          {"timeout", timeout},
          {"broadcast_root", broadcast_root},
          {"ring_exchange_concurrency", opt(ring_exchange_concurrency)},
          {"allreduce_block_bytes", opt(allreduce_block_bytes)},
          {"reduce", reduce},
          {"dtype", dtype},
          {"algorithm", algorithm}};
}

}  // namespace wcomm::tools
