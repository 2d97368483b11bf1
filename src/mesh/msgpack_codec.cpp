// MsgpackCodec (Value <-> MessagePack through msgpack-cxx) and codec_by_name.
#include <msgpack.hpp>

#include "wcomm/errors.h"
#include "wcomm/mesh/codec.h"

namespace wcomm::mesh {
namespace {

void pack(msgpack::packer<msgpack::sbuffer>& pk, const Value& v, int depth) {
  if (depth > 200) throw SerializationError("msgpack codec: value nested deeper than 200 levels");
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, None>) pk.pack_nil();
        else if constexpr (std::is_same_v<T, bool>) x ? pk.pack_true() : pk.pack_false();
        else if constexpr (std::is_same_v<T, std::int64_t>) pk.pack_int64(x);
        else if constexpr (std::is_same_v<T, std::uint64_t>) pk.pack_uint64(x);
        else if constexpr (std::is_same_v<T, double>) pk.pack_double(x);
        else if constexpr (std::is_same_v<T, std::string>) {
          pk.pack_str(static_cast<std::uint32_t>(x.size()));
          pk.pack_str_body(x.data(), static_cast<std::uint32_t>(x.size()));
        } else if constexpr (std::is_same_v<T, Bytes>) {
          pk.pack_bin(static_cast<std::uint32_t>(x.size()));
          pk.pack_bin_body(x.view().data(), static_cast<std::uint32_t>(x.size()));
        } else if constexpr (std::is_same_v<T, List> || std::is_same_v<T, Tuple>) {
          pk.pack_array(static_cast<std::uint32_t>(x.items.size()));
          for (const Value& item : x.items) pack(pk, item, depth + 1);
        } else if constexpr (std::is_same_v<T, Dict>) {
          pk.pack_map(static_cast<std::uint32_t>(x.items.size()));
          for (const auto& [k, val] : x.items) {
            pack(pk, k, depth + 1);
            pack(pk, val, depth + 1);
          }
        } else {
          throw SerializationError(
              "msgpack codec: cannot encode a tensor, record, custom or pickled value (the mesh carries None, bool, "
              "int, float, str, bytes, list, tuple and dict)");
        }
      },
      v.variant());
}

Value unpack(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return None{};
    case msgpack::type::BOOLEAN: return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER: return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER: return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return o.via.f64;
    case msgpack::type::STR: return std::string(o.via.str.ptr, o.via.str.size);
    case msgpack::type::BIN: return Bytes(std::string_view(o.via.bin.ptr, o.via.bin.size));
    case msgpack::type::ARRAY: {
      List list;
      list.items.reserve(o.via.array.size);
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) list.items.push_back(unpack(o.via.array.ptr[i]));
      return list;
    }
    case msgpack::type::MAP: {
      Dict dict;
      dict.items.reserve(o.via.map.size);
      for (std::uint32_t i = 0; i < o.via.map.size; ++i)
        dict.items.emplace_back(unpack(o.via.map.ptr[i].key), unpack(o.via.map.ptr[i].val));
      return dict;
    }
    default: throw SerializationError("msgpack codec: cannot decode an ext value (type " + std::to_string(o.type) + ")");
  }
}

}  // namespace

std::string MsgpackCodec::encode(const Value& value) const {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  pack(pk, value, 0);
  return std::string(buffer.data(), buffer.size());
}

Value MsgpackCodec::decode(std::string_view data) const {
  try {
    msgpack::object_handle handle = msgpack::unpack(data.data(), data.size());
    return unpack(handle.get());
  } catch (const msgpack::unpack_error& e) {
    throw SerializationError(std::string("msgpack codec: cannot decode a message of ") + std::to_string(data.size()) +
                             " bytes: " + e.what());
  }
}

std::shared_ptr<const Codec> codec_by_name(std::string_view name) {
  if (name == "pickle") return std::make_shared<PickleCodec>();
  if (name == "msgpack") return std::make_shared<MsgpackCodec>();
  throw InvalidArgumentError("unknown mesh codec '" + std::string(name) + "' (known: pickle, msgpack)");
}

}  // namespace wcomm::mesh
