// Encoding and checked decoding of the cache service's request and ack.
#include "transfer/cache_messages.h"

#include "transfer/metadata.h"

namespace wcomm::xfer {

namespace {
const Value* field(const Dict& d, const char* key, std::string& why) {
  const Value* v = d.find(key);
  if (!v) why = std::string("no field '") + key + "'";
  return v;
}
bool get(const Dict& d, const char* key, std::string& out, std::string& why) {
  const Value* v = field(d, key, why);
  if (v && v->is<std::string>()) return out = v->as<std::string>(), true;
  if (v && v->is<Bytes>()) return out = std::string(v->as<Bytes>().view()), true;
  if (v) why = std::string("field '") + key + "' is not a string";
  return false;
}
bool get(const Dict& d, const char* key, std::uint64_t& out, std::string& why) {
  const Value* v = field(d, key, why);
  if (v && v->is<std::int64_t>() && v->as<std::int64_t>() >= 0) return out = static_cast<std::uint64_t>(v->as<std::int64_t>()), true;
  if (v && v->is<std::uint64_t>()) return out = v->as<std::uint64_t>(), true;
  if (v) why = std::string("field '") + key + "' is not an unsigned integer";
  return false;
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
  if (!get(*d, "request_id", r.request_id, why) || !get(*d, "key", r.key, why) || !get(*d, "blocks", blocks, why) ||
      !get(*d, "version", r.version, why) || !get(*d, "compat_hash", r.compat_hash, why) ||
      !get(*d, "agent_metadata", r.agent_metadata, why))
    return std::nullopt;
  Result<DescList> descs = decode_descs(blocks);
  if (!descs) return why = descs.error().message, std::nullopt;
  r.blocks = std::move(descs).value();
  if (const Value* t = d->find("timeout_s"); t && t->is<double>()) r.timeout_s = t->as<double>();
  return r;
}

std::optional<CacheAck> ack_from(const Value& v, std::string& why) {
  const Dict* d = v.get_if<Dict>();
  if (!d) return why = "not a dict", std::nullopt;
  CacheAck a;
  if (!get(*d, "request_id", a.request_id, why) || !get(*d, "key", a.key, why) || !get(*d, "reason", a.reason, why) ||
      !get(*d, "bytes", a.bytes, why))
    return std::nullopt;
  const Value* ok = field(*d, "ok", why);
  if (!ok || !ok->is<bool>()) return why = "field 'ok' is not a bool", std::nullopt;
  a.ok = ok->as<bool>();
  return a;
}

}  // namespace wcomm::xfer
