// The HELLO / HELLO_ACK / CLOSE control frames: {"control": {...}, "segments": []}.
#include "core/codec_internal.h"

namespace wcomm {

using codec_detail::fail;
using codec_detail::pack_name;
using codec_detail::pack_str;
using codec_detail::str_of;
using msgpack::type::object_type;
using Packer = codec_detail::Packer;

std::vector<std::uint8_t> encode_control(FrameKind kind, const Control& control) {
  bool handshake = kind == FrameKind::kHello || kind == FrameKind::kHelloAck;
  if (!handshake && kind != FrameKind::kClose && kind != FrameKind::kHeartbeat && kind != FrameKind::kAck &&
      kind != FrameKind::kAuth)
    throw InvalidArgumentError("encode_control takes HELLO, HELLO_ACK, CLOSE, HEARTBEAT, ACK or AUTH, not kind " +
                               std::to_string(static_cast<int>(kind)));
  if (handshake && control.node_id.empty()) throw InvalidArgumentError("a handshake frame needs a node_id");
  if (handshake && !codec_detail::is_connection_id(control.connection_id))
    throw InvalidArgumentError("connection_id must be 32 lowercase hex characters, got '" + control.connection_id + "'");

  std::vector<std::uint8_t> out(kHeaderSize);
  codec_detail::VectorSink sink{&out};
  Packer p(sink);
  auto run = codec_detail::run_guarded([&]() -> Status {
    // HELLO and HELLO_ACK always carry both fields (V0.1 requires them); CLOSE carries only
    // what is set. "features" is a wcomm extension, so it is left out when empty and a V0.1
    // peer sees exactly the frame it expects.
    bool with_ids = handshake || !control.node_id.empty() || !control.connection_id.empty();
    std::uint32_t entries = (with_ids ? 2 : 0) + (control.features.empty() ? 0 : 1) + (control.acks.empty() ? 0 : 1);
    p.pack_map(2);
    pack_name(p, "control");
    p.pack_map(entries);
    if (with_ids) {
      pack_name(p, "node_id");
      pack_str(p, control.node_id, "node_id");
      pack_name(p, "connection_id");
      pack_str(p, control.connection_id, "connection_id");
    }
    if (!control.features.empty()) {
      pack_name(p, "features");
      p.pack_array(static_cast<std::uint32_t>(control.features.size()));
      for (const auto& f : control.features) pack_str(p, f, "feature name");
    }
    if (!control.acks.empty()) {
      pack_name(p, "acks");
      p.pack_array(static_cast<std::uint32_t>(control.acks.size()));
      for (std::uint64_t id : control.acks) p.pack_uint64(id);
    }
    pack_name(p, "segments");
    p.pack_array(0);
    return Ok{};
  });
  if (!run) throw InvalidArgumentError(run.error().message);

  FrameHeader h;
  h.kind = kind;
  h.manifest_size = static_cast<std::uint32_t>(out.size() - kHeaderSize);
  write_header(h, out.data());
  return out;
}

Result<Control> decode_control(const FrameHeader& header, std::span<const std::uint8_t> manifest) {
  return codec_detail::run_guarded([&]() -> Result<Control> {
    bool handshake = header.kind == FrameKind::kHello || header.kind == FrameKind::kHelloAck;
    if (!handshake && header.kind != FrameKind::kClose && header.kind != FrameKind::kHeartbeat &&
        header.kind != FrameKind::kAck && header.kind != FrameKind::kAuth)
      fail(ErrorCode::kProtocol, "decode_control called on a DATA frame");
    if (header.segment_count != 0 || header.payload_size != 0)
      fail(ErrorCode::kProtocol, "a control frame carries no segments, but this one declares " +
                                     std::to_string(header.segment_count) + " segments of " +
                                     std::to_string(header.payload_size) + " bytes");
    if (manifest.size() != header.manifest_size)
      fail(ErrorCode::kProtocol, "manifest span of " + std::to_string(manifest.size()) +
                                     " bytes but the header declares " + std::to_string(header.manifest_size));
    // Control manifests are tiny; these bounds are generous and still stop any hostile length.
    auto handle = codec_detail::unpack_document(manifest, 8, std::min<std::size_t>(manifest.size(), 4096),
                                                "control manifest");
    const msgpack::object& top = handle.get();
    if (top.type != object_type::MAP) fail(ErrorCode::kProtocol, "control manifest must be a map");

    // Unknown keys are ignored here (unlike in DATA manifests): control frames are where a
    // newer peer would add fields, and ignoring them keeps the handshake working.
    const msgpack::object* control = nullptr;
    for (std::uint32_t i = 0; i < top.via.map.size; ++i) {
      const auto& kv = top.via.map.ptr[i];
      if (kv.key.type != object_type::STR) fail(ErrorCode::kProtocol, "control manifest keys must be str");
      auto key = str_of(kv.key);
      if (key == "control") {
        control = &kv.val;
      } else if (key == "segments") {
        if (kv.val.type != object_type::ARRAY || kv.val.via.array.size != 0)
          fail(ErrorCode::kProtocol, "a control frame's 'segments' must be an empty array");
      }
    }
    Control out;
    if (!control) {
      if (handshake) fail(ErrorCode::kProtocol, "handshake frame has no 'control' map");
      return out;
    }
    if (control->type != object_type::MAP) fail(ErrorCode::kProtocol, "'control' must be a map");
    bool has_node = false, has_connection = false;
    auto text = [](const msgpack::object& o, const char* what) {
      if (o.type != object_type::STR || !codec_detail::valid_utf8(str_of(o)))
        fail(ErrorCode::kProtocol, std::string("control field '") + what + "' must be a UTF-8 str");
      return std::string(str_of(o));
    };
    for (std::uint32_t i = 0; i < control->via.map.size; ++i) {
      const auto& kv = control->via.map.ptr[i];
      if (kv.key.type != object_type::STR) fail(ErrorCode::kProtocol, "'control' keys must be str");
      auto key = str_of(kv.key);
      if (key == "node_id") {
        out.node_id = text(kv.val, "node_id");
        has_node = true;
      } else if (key == "connection_id") {
        out.connection_id = text(kv.val, "connection_id");
        has_connection = true;
      } else if (key == "features") {
        if (kv.val.type != object_type::ARRAY) fail(ErrorCode::kProtocol, "control field 'features' must be an array");
        for (std::uint32_t k = 0; k < kv.val.via.array.size; ++k)
          out.features.push_back(text(kv.val.via.array.ptr[k], "features"));
      } else if (key == "acks") {
        if (kv.val.type != object_type::ARRAY) fail(ErrorCode::kProtocol, "control field 'acks' must be an array");
        for (std::uint32_t k = 0; k < kv.val.via.array.size; ++k) {
          const auto& id = kv.val.via.array.ptr[k];
          if (id.type != object_type::POSITIVE_INTEGER) fail(ErrorCode::kProtocol, "control field 'acks' holds message ids");
          out.acks.push_back(id.via.u64);
        }
      }
    }
    if (handshake) {
      if (!has_node || out.node_id.empty()) fail(ErrorCode::kProtocol, "handshake frame has no node_id");
      if (!has_connection || !codec_detail::is_connection_id(out.connection_id))
        fail(ErrorCode::kProtocol, "handshake connection_id must be 32 lowercase hex characters");
    }
    return out;
  });
}

}  // namespace wcomm
