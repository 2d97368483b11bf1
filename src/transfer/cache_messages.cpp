// Encoding and checked decoding of the cache service's request and ack.
#include "transfer/cache_messages.h"

#include "core/dict_fields.h"
#include "transfer/metadata.h"

namespace wcomm::xfer {

namespace {
// Reads one field into `out`; false with `why` set to the field's reason when it cannot.
template <class T, class U>
bool read(Result<T> field, U& out, std::string& why) {
  if (!field.ok()) return why = field.error().message, false;
  out = std::move(field).value();
  return true;
}
}  // namespace

Value to_value(const CacheRequest& r) {
  return Dict{{"type", "xfer_req"},       {"request_id", r.request_id}, {"key", r.key},
              {"blocks", Bytes(encode_descs(r.blocks))}, {"version", r.version}, {"compat_hash", r.compat_hash},
              {"agent_metadata", Bytes(r.agent_metadata)}, {"timeout_s", r.timeout_s}};
}

Value to_value(const CacheAck& a) {
  return Dict{{"type", "xfer_ack"}, {"request_id", a.request_id}, {"key", a.key},
              {"ok", a.ok},         {"reason", a.reason},         {"bytes", a.bytes}};
}

std::optional<CacheRequest> request_from(const Value& v, std::string& why) {
  const Dict* d = v.get_if<Dict>();
  if (!d) return why = "not a dict", std::nullopt;
  CacheRequest r;
  std::string blocks;
  if (!read(fields::uint64(*d, "request_id"), r.request_id, why) || !read(fields::string_or_bytes(*d, "key"), r.key, why) ||
      !read(fields::string_or_bytes(*d, "blocks"), blocks, why) || !read(fields::string_or_bytes(*d, "version"), r.version, why) ||
      !read(fields::string_or_bytes(*d, "compat_hash"), r.compat_hash, why) ||
      !read(fields::string_or_bytes(*d, "agent_metadata"), r.agent_metadata, why))
    return std::nullopt;
  Result<DescList> descs = decode_descs(blocks);
  if (!descs) return why = descs.error().message, std::nullopt;
  r.blocks = std::move(descs).value();
  if (d->find("timeout_s") && !read(fields::number(*d, "timeout_s"), r.timeout_s, why)) return std::nullopt;  // optional
  return r;
}

std::optional<CacheAck> ack_from(const Value& v, std::string& why) {
  const Dict* d = v.get_if<Dict>();
  if (!d) return why = "not a dict", std::nullopt;
  CacheAck a;
  if (!read(fields::uint64(*d, "request_id"), a.request_id, why) || !read(fields::string_or_bytes(*d, "key"), a.key, why) ||
      !read(fields::string_or_bytes(*d, "reason"), a.reason, why) || !read(fields::uint64(*d, "bytes"), a.bytes, why) ||
      !read(fields::boolean(*d, "ok"), a.ok, why))
    return std::nullopt;
  return a;
}

}  // namespace wcomm::xfer
