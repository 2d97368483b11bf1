// Agent metadata and descriptor lists to and from msgpack, checked field by field: a peer's
// bytes are input like any other and a bad one is refused with what was wrong.
#include "transfer/metadata.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <msgpack.hpp>

namespace wcomm::xfer {

namespace {
using msgpack::type::object_type;

void pack_descs(msgpack::packer<msgpack::sbuffer>& pk, const DescList& descs) {
  pk.pack_array(static_cast<std::uint32_t>(descs.size()));
  for (const Desc& d : descs) {
    pk.pack_array(3);
    pk.pack(d.addr);
    pk.pack(d.len);
    pk.pack(d.dev_id);
  }
}

// Throws std::runtime_error with the problem; the callers turn it into an Error.
std::uint64_t as_uint(const msgpack::object& o, const char* what) {
  if (o.type != object_type::POSITIVE_INTEGER) throw std::runtime_error(std::string(what) + " is not an unsigned integer");
  return o.via.u64;
}
std::string as_bytes(const msgpack::object& o, const char* what) {
  if (o.type == object_type::STR) return std::string(o.via.str.ptr, o.via.str.size);
  if (o.type == object_type::BIN) return std::string(o.via.bin.ptr, o.via.bin.size);
  throw std::runtime_error(std::string(what) + " is not a string");
}
DescList unpack_descs(const msgpack::object& o) {
  if (o.type != object_type::ARRAY) throw std::runtime_error("descriptor list is not an array");
  DescList out;
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    const msgpack::object& e = o.via.array.ptr[i];
    if (e.type != object_type::ARRAY || e.via.array.size != 3)
      throw std::runtime_error("descriptor " + std::to_string(i) + " is not [addr, len, dev_id]");
    out.push_back({as_uint(e.via.array.ptr[0], "addr"), as_uint(e.via.array.ptr[1], "len"),
                   static_cast<std::uint32_t>(as_uint(e.via.array.ptr[2], "dev_id"))});
  }
  return out;
}
}  // namespace

std::string encode_metadata(const AgentMetadata& m) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(11);
  pk.pack("format"); pk.pack(m.format);
  pk.pack("name"); pk.pack(m.name);
  pk.pack("generation"); pk.pack(m.generation);
  pk.pack("host_id"); pk.pack(m.host_id);
  pk.pack("pid"); pk.pack(m.pid);
  pk.pack("pid_start"); pk.pack(m.pid_start);
  pk.pack("comm_node"); pk.pack(m.comm_node);
  pk.pack("comm_addresses"); pk.pack(m.comm_addresses);
  pk.pack("regions"); pack_descs(pk, m.regions);
  pk.pack("ucx_address"); pk.pack_bin(static_cast<std::uint32_t>(m.ucx_address.size()));
  pk.pack_bin_body(m.ucx_address.data(), static_cast<std::uint32_t>(m.ucx_address.size()));
  pk.pack("ucx_rkeys"); pk.pack_array(static_cast<std::uint32_t>(m.ucx_rkeys.size()));
  for (const std::string& k : m.ucx_rkeys) {
    pk.pack_bin(static_cast<std::uint32_t>(k.size()));
    pk.pack_bin_body(k.data(), static_cast<std::uint32_t>(k.size()));
  }
  return std::string(buf.data(), buf.size());
}

Result<AgentMetadata> decode_metadata(std::string_view bytes) {
  try {
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
    const msgpack::object& top = handle.get();
    if (top.type != object_type::MAP) throw std::runtime_error("not a msgpack map");
    AgentMetadata m;
    bool have_name = false, have_generation = false;
    for (std::uint32_t i = 0; i < top.via.map.size; ++i) {
      const std::string key = as_bytes(top.via.map.ptr[i].key, "a key");
      const msgpack::object& v = top.via.map.ptr[i].val;
      if (key == "format") m.format = static_cast<std::uint32_t>(as_uint(v, "format"));
      else if (key == "name") { m.name = as_bytes(v, "name"); have_name = true; }
      else if (key == "generation") { m.generation = as_uint(v, "generation"); have_generation = true; }
      else if (key == "host_id") m.host_id = as_bytes(v, "host_id");
      else if (key == "pid") m.pid = static_cast<std::int64_t>(as_uint(v, "pid"));
      else if (key == "pid_start") m.pid_start = as_uint(v, "pid_start");
      else if (key == "comm_node") m.comm_node = as_bytes(v, "comm_node");
      else if (key == "regions") m.regions = unpack_descs(v);
      else if (key == "comm_addresses") {
        if (v.type != object_type::ARRAY) throw std::runtime_error("comm_addresses is not an array");
        for (std::uint32_t j = 0; j < v.via.array.size; ++j)
          m.comm_addresses.push_back(as_bytes(v.via.array.ptr[j], "a comm address"));
      }
      else if (key == "ucx_address") m.ucx_address = as_bytes(v, "ucx_address");
      else if (key == "ucx_rkeys") {
        if (v.type != object_type::ARRAY) throw std::runtime_error("ucx_rkeys is not an array");
        for (std::uint32_t j = 0; j < v.via.array.size; ++j) m.ucx_rkeys.push_back(as_bytes(v.via.array.ptr[j], "an rkey"));
      }
      // Unknown keys are skipped: a newer agent may add fields.
    }
    if (m.format != 1) throw std::runtime_error("format " + std::to_string(m.format) + " is not 1");
    if (!have_name || m.name.empty()) throw std::runtime_error("no name");
    if (!have_generation) throw std::runtime_error("no generation");
    if (!m.ucx_rkeys.empty() && m.ucx_rkeys.size() != m.regions.size())
      throw std::runtime_error("ucx_rkeys has " + std::to_string(m.ucx_rkeys.size()) + " entries for " +
                               std::to_string(m.regions.size()) + " regions");
    return m;
  } catch (const std::exception& e) {
    return Error{ErrorCode::kInvalidArgument, std::string("bad agent metadata: ") + e.what()};
  }
}

std::string encode_descs(const DescList& descs) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pack_descs(pk, descs);
  return std::string(buf.data(), buf.size());
}

Result<DescList> decode_descs(std::string_view bytes) {
  try {
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
    return unpack_descs(handle.get());
  } catch (const std::exception& e) {
    return Error{ErrorCode::kInvalidArgument, std::string("bad descriptor list: ") + e.what()};
  }
}

std::string local_host_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  struct stat st {};
  // Two processes on one kernel but in different pid namespaces cannot name each other's pid.
  if (::stat("/proc/self/ns/pid", &st) == 0) id += ":" + std::to_string(st.st_ino);
  return id;
}

std::uint64_t process_start_time(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  // Field 22 (starttime); the text after ')' starts at field 3.
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return 0;
}

}  // namespace wcomm::xfer
