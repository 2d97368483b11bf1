// Message codecs of the entity mesh: how a Value becomes the one ZeroMQ frame (or wcomm bytes
// message) an entity sends. Pickle (what pyzmq's send_pyobj writes), msgpack, or your own.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "wcomm/value.h"

namespace wcomm::mesh {

// A pluggable codec. encode / decode throw SerializationError naming what they cannot carry.
class Codec {
 public:
  virtual ~Codec() = default;
  virtual std::string name() const = 0;
  virtual std::string encode(const Value& value) const = 0;
  virtual Value decode(std::string_view data) const = 0;
};

// Python pickle, the mesh's wire format (mesh-zmq.md): encodes at protocol 4 and decodes
// protocols 2-5 for the value types the mesh uses: None, bool, int (64-bit), float, str,
// bytes, list, tuple, dict. Anything else (a class instance, a set, a big int) is refused
// with SerializationError naming the pickle opcode or the Value type.
class PickleCodec : public Codec {
 public:
  std::string name() const override { return "pickle"; }
  std::string encode(const Value& value) const override;
  Value decode(std::string_view data) const override;
};

// MessagePack: maps, arrays (a Tuple encodes as an array), str, bin, int, float, bool, nil.
// Faster than pickle and readable from any language, but not what pyzmq entities expect.
class MsgpackCodec : public Codec {
 public:
  std::string name() const override { return "msgpack"; }
  std::string encode(const Value& value) const override;
  Value decode(std::string_view data) const override;
};

// The codec named "pickle" or "msgpack"; InvalidArgumentError for any other name.
std::shared_ptr<const Codec> codec_by_name(std::string_view name);

}  // namespace wcomm::mesh
