// CommConfig validation and the YAML node config loader (V0.1 schema: local / peers / comm).
// Every rejection is an InvalidArgumentError that names the file, the key and the bad value.
#include "wcomm/config.h"

#include "core/config_yaml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "wcomm/errors.h"

namespace wcomm {
namespace {

// ---------------------------------------------------------------------------------------------
// CommConfig::validate
//
// Accepted values, and why:
//   max_message_bytes            1 .. 2^48      a frame (header + manifest + payload); the cap
//                                               keeps sums of limits far from u64 overflow
//   max_manifest_bytes           1 .. 2^32-1    the header's manifest_size is a u32; and it
//                                 (< max_message_bytes) must leave room for the 36-byte header
//   max_metadata_bytes           1 .. max_manifest_bytes   the piggypayload lives inside it
//   max_segments                 1 .. 2^20      segment_count is a u32, and every segment costs
//                                               a length in the manifest and an iovec entry
//   max_container_depth          1 .. 4096      decoding recurses; deeper would risk the stack
//   max_container_nodes          >= 1
//   max_peer_queued_messages     >= 1           a zero bound would refuse every send
//   max_peer_queued_bytes        1 .. 2^48
//   max_peer_unreceived_messages >= 1           a zero bound would never read the socket
//   max_peer_unreceived_bytes    1 .. 2^48
//   connect_timeout_s            finite, > 0
//   egress_quantum_bytes         0 (null) or 1 .. 2^48      V0.1's rules: each egress key,
//   egress_rate_bytes_per_second 0 (null) or a whole number  when set, is a positive integer;
//                                >= 1                       a rate or a burst needs a quantum;
//   egress_burst_bytes           0 (null) or quantum .. 2^48 the bucket must hold one quantum
//                                               or it never lets a write through. A null burst
//                                               is one quantum (the loaders fill it in; the
//                                               pacer reads a 0 burst so too)
//   egress_max_bulk_flows        0 (no cap) .. 10^6, needs a quantum
//   chunk_bytes                  0 (off) or 4 KiB .. 64 MiB   smaller chunks cost a header each
//   tcp_notsent_lowat_bytes      0 (kernel default) .. 2^30
//   tcp_max_pacing_rate_bytes_per_second  0 (unpaced) .. 2^32 - 1   the kernel's socket option is 32-bit
//   tcp_target_queue_delay_us    0 (off) .. 10^6             a second of queue is no bound
//   compression                  auto | off
//   recv_busy_poll_us            0 .. 1000000   a second of spinning per recv is already
//                                               far past any use
//   heartbeat_interval_s         0 (off) or 0.01 .. 3600    finer would be traffic, not liveness
//   handshake_timeout_s          finite, > 0
//   reconnect_backoff_initial_s  finite, > 0, <= reconnect_backoff_max_s
//   reconnect_backoff_max_s      finite, <= 3600
// ---------------------------------------------------------------------------------------------

constexpr std::uint64_t kMaxByteLimit = 1ull << 48;
constexpr std::uint64_t kMaxManifestBytes = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kMaxSegments = 1ull << 20;
constexpr std::uint64_t kMaxContainerDepth = 4096;
constexpr std::uint64_t kMaxBusyPollUs = 1'000'000;

bool is_transport_choice(const std::string& t) {
  return t == "auto" || t == "shm" || t == "unix" || t == "tcp" || t == "ucx";
}

// The first unacceptable field of a CommConfig: its name and what is wrong with its value.
struct ConfigProblem {
  std::string field;
  std::string message;
};

std::string format_double(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::optional<ConfigProblem> check_range(const char* field, std::uint64_t value, std::uint64_t lo,
                                         std::uint64_t hi, const std::string& range_text) {
  if (value >= lo && value <= hi) return std::nullopt;
  return ConfigProblem{field, "must be " + range_text + ", got " + std::to_string(value)};
}

// The egress keys, checked as V0.1 checks them (its messages are kept inside ours, so scripts
// that match them keep working). 0 stands for V0.1's null in every one of the three.
std::optional<ConfigProblem> find_egress_problem(const CommConfig& c) {
  const double rate = c.egress_rate_bytes_per_second;
  if (!std::isfinite(rate) || rate < 0 || (rate > 0 && (rate < 1 || rate != std::floor(rate))))
    return ConfigProblem{"egress_rate_bytes_per_second",
                         "egress_rate_bytes_per_second must be positive when configured: a whole number of "
                         "bytes per second >= 1 (0 or null = unlimited), got " + format_double(rate)};
  if (c.egress_quantum_bytes > kMaxByteLimit)
    return ConfigProblem{"egress_quantum_bytes", "must be at most 2^48 (" + std::to_string(kMaxByteLimit) +
                                                     "), got " + std::to_string(c.egress_quantum_bytes)};
  if (c.egress_burst_bytes > kMaxByteLimit)
    return ConfigProblem{"egress_burst_bytes", "must be at most 2^48 (" + std::to_string(kMaxByteLimit) +
                                                   "), got " + std::to_string(c.egress_burst_bytes)};
  if (rate > 0 && c.egress_quantum_bytes == 0)
    return ConfigProblem{"egress_rate_bytes_per_second",
                         "egress pacing requires egress_quantum_bytes: set egress_quantum_bytes (e.g. 65536) "
                         "or leave the rate null"};
  if (c.egress_burst_bytes > 0 && c.egress_quantum_bytes == 0)
    return ConfigProblem{"egress_burst_bytes",
                         "egress burst requires egress_quantum_bytes: set egress_quantum_bytes (e.g. 65536) "
                         "or leave the burst null"};
  if (c.egress_burst_bytes > 0 && c.egress_burst_bytes < c.egress_quantum_bytes)
    return ConfigProblem{"egress_burst_bytes", "egress burst must be at least one quantum (egress_quantum_bytes=" +
                                                   std::to_string(c.egress_quantum_bytes) + "), got " +
                                                   std::to_string(c.egress_burst_bytes)};
  return std::nullopt;
}

std::optional<ConfigProblem> find_problem(const CommConfig& c) {
  const std::string byte_range = "between 1 and 2^48 (" + std::to_string(kMaxByteLimit) + ")";
  const std::string positive = "a positive integer";
  constexpr auto u64_max = std::numeric_limits<std::uint64_t>::max();
  std::optional<ConfigProblem> p;
  if ((p = check_range("max_message_bytes", c.max_message_bytes, 1, kMaxByteLimit, byte_range)))
    return p;
  if ((p = check_range("max_manifest_bytes", c.max_manifest_bytes, 1, kMaxManifestBytes,
                       "between 1 and 2^32-1 (" + std::to_string(kMaxManifestBytes) +
                           ", the wire's u32 manifest_size)")))
    return p;
  if (c.max_manifest_bytes >= c.max_message_bytes)
    return ConfigProblem{"max_manifest_bytes",
                         "must be less than max_message_bytes (" +
                             std::to_string(c.max_message_bytes) + "), got " +
                             std::to_string(c.max_manifest_bytes)};
  if ((p = check_range("max_metadata_bytes", c.max_metadata_bytes, 1, c.max_manifest_bytes,
                       "between 1 and max_manifest_bytes (" +
                           std::to_string(c.max_manifest_bytes) + ")")))
    return p;
  if ((p = check_range("max_segments", c.max_segments, 1, kMaxSegments,
                       "between 1 and 2^20 (" + std::to_string(kMaxSegments) + ")")))
    return p;
  if ((p = check_range("max_container_depth", c.max_container_depth, 1, kMaxContainerDepth,
                       "between 1 and " + std::to_string(kMaxContainerDepth))))
    return p;
  if ((p = check_range("max_container_nodes", c.max_container_nodes, 1, u64_max, positive)))
    return p;
  if ((p = check_range("max_peer_queued_messages", c.max_peer_queued_messages, 1, u64_max,
                       positive)))
    return p;
  if ((p = check_range("max_peer_queued_bytes", c.max_peer_queued_bytes, 1, kMaxByteLimit,
                       byte_range)))
    return p;
  if ((p = check_range("max_peer_unreceived_messages", c.max_peer_unreceived_messages, 1, u64_max,
                       positive)))
    return p;
  if ((p = check_range("max_peer_unreceived_bytes", c.max_peer_unreceived_bytes, 1, kMaxByteLimit,
                       byte_range)))
    return p;
  if (!std::isfinite(c.connect_timeout_s) || c.connect_timeout_s <= 0)
    return ConfigProblem{"connect_timeout_s", "must be a finite number of seconds > 0, got " +
                                                  format_double(c.connect_timeout_s)};
  if ((p = find_egress_problem(c))) return p;
  if (c.chunk_bytes != 0 && (p = check_range("chunk_bytes", c.chunk_bytes, 4096, 64ull << 20,
                                             "0 (off) or between 4096 and 67108864")))
    return p;
  if ((p = check_range("tcp_notsent_lowat_bytes", c.tcp_notsent_lowat_bytes, 0, 1ull << 30,
                       "0 (the kernel's default) or at most 2^30")))
    return p;
  if ((p = check_range("tcp_max_pacing_rate_bytes_per_second", c.tcp_max_pacing_rate_bytes_per_second, 0,
                       0xffffffffull, "0 (unpaced) or at most 4294967295")))
    return p;
  if ((p = check_range("tcp_target_queue_delay_us", c.tcp_target_queue_delay_us, 0, 1'000'000,
                       "0 (off) or at most 1000000 (1 s)")))
    return p;
  if ((p = check_range("egress_max_bulk_flows", c.egress_max_bulk_flows, 0, 1'000'000,
                       "0 (no cap) or at most 1000000")))
    return p;
  if (c.egress_max_bulk_flows > 0 && c.egress_quantum_bytes == 0)
    return ConfigProblem{"egress_max_bulk_flows",
                         "a bulk flow cap needs the egress scheduler: set egress_quantum_bytes (e.g. 65536)"};
  if (c.compression != "auto" && c.compression != "off")
    return ConfigProblem{"compression", "must be auto or off, got '" + c.compression + "'"};
  if ((p = check_range("recv_busy_poll_us", c.recv_busy_poll_us, 0, kMaxBusyPollUs,
                       "between 0 and 1000000 microseconds")))
    return p;
  const double hb = c.heartbeat_interval_s;
  if (!std::isfinite(hb) || (hb != 0 && (hb < 0.01 || hb > 3600)))
    return ConfigProblem{"heartbeat_interval_s", "must be 0 (off) or between 0.01 and 3600 seconds, got " +
                                                     format_double(hb)};
  if (!std::isfinite(c.handshake_timeout_s) || c.handshake_timeout_s <= 0)
    return ConfigProblem{"handshake_timeout_s", "must be a finite number of seconds > 0, got " +
                                                    format_double(c.handshake_timeout_s)};
  if ((p = check_range("max_pending_handshakes", c.max_pending_handshakes, 1, 1'000'000,
                       "between 1 and 1000000")))
    return p;
  if ((p = check_range("max_pending_handshakes_per_source", c.max_pending_handshakes_per_source, 1, 1'000'000,
                       "between 1 and 1000000")))
    return p;
  if ((p = check_range("max_peers", c.max_peers, 1, 1'000'000, "between 1 and 1000000"))) return p;
  if (c.allow_unauthenticated_joins && !c.accept_unknown_peers)
    return ConfigProblem{"allow_unauthenticated_joins", "has no effect without accept_unknown_peers: true"};
  if (!c.cluster_key.empty() && c.cluster_key.size() < 16)
    return ConfigProblem{"cluster_key", "must be at least 16 bytes (random ones), got " +
                                            std::to_string(c.cluster_key.size())};
  if (!is_transport_choice(c.transport))
    return ConfigProblem{"transport", "must be one of auto, shm, unix, tcp, ucx, got '" + c.transport + "'"};
  if (c.tls.enabled()) {
    for (const auto& [name, value] : {std::pair{"tls.cert_file", &c.tls.cert_file}, std::pair{"tls.key_file", &c.tls.key_file},
                                      std::pair{"tls.ca_file", &c.tls.ca_file}})
      if (value->empty())
        return ConfigProblem{name, "is missing: TLS needs cert_file, key_file and ca_file (scripts/make-test-certs.sh "
                                   "makes a test set)"};
    if (c.transport == "shm" || c.transport == "unix" || c.transport == "ucx")
      return ConfigProblem{"transport", "'" + c.transport + "' would bypass TLS (comm.tls is set): use auto or tcp"};
  }
  if (!std::isfinite(c.reconnect_backoff_max_s) || c.reconnect_backoff_max_s > 3600)
    return ConfigProblem{"reconnect_backoff_max_s", "must be at most 3600 seconds, got " +
                                                        format_double(c.reconnect_backoff_max_s)};
  if (!std::isfinite(c.reconnect_backoff_initial_s) || c.reconnect_backoff_initial_s <= 0 ||
      c.reconnect_backoff_initial_s > c.reconnect_backoff_max_s)
    return ConfigProblem{"reconnect_backoff_initial_s",
                         "must be > 0 and at most reconnect_backoff_max_s (" +
                             format_double(c.reconnect_backoff_max_s) + "), got " +
                             format_double(c.reconnect_backoff_initial_s)};
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// YAML node config
// ---------------------------------------------------------------------------------------------

// The text with every byte that is not part of valid UTF-8 written as \xNN: a message quotes
// the file's own bytes, and Python (and terminals) need valid UTF-8 to show any of it.
std::string printable_utf8(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool valid = n > 0 && i + n <= text.size() && !(n == 2 && c < 0xC2);
    for (std::size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (valid) {
      out.append(text, i, n);
      i += n;
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      i += 1;
    }
  }
  return out;
}

// Raised with the file name and, where known, the line of the offending node.
[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& what,
                       const YAML::Mark* mark = nullptr) {
  std::string message = origin + ": ";
  if (!key.empty()) message += key + ": ";
  message += what;
  if (mark != nullptr && mark->line >= 0) message += " (line " + std::to_string(mark->line + 1) + ")";
  throw InvalidArgumentError(printable_utf8(message));
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The closest allowed key, when it is close enough to be a likely typo.
std::string suggestion(const std::string& key, const std::vector<std::string_view>& allowed) {
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (std::string_view candidate : allowed) {
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  const std::size_t tolerance = std::max<std::size_t>(2, key.size() / 3);
  if (best.empty() || best_distance > tolerance) return "";
  return " (did you mean " + std::string(best) + "?)";
}

std::string join(const std::vector<std::string_view>& items) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

// How a node reads in a message: its scalar text, or what kind of node it is instead.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    default: return "nothing";
  }
}

// A plain scalar is one written without quotes; yaml-cpp tags quoted scalars "!". Numbers and
// booleans must be plain so that `port: "9000"` is caught as the string it is.
bool is_plain_scalar(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() != "!";
}

// Parses an unsigned YAML integer: decimal (YAML 1.1's digit-group underscores allowed, as the
// Python V0.1 loader's PyYAML accepts them, but no leading zero), or 0x hexadecimal.
std::optional<std::uint64_t> parse_unsigned(std::string text) {
  if (!text.empty() && text.front() == '+') text.erase(0, 1);
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.erase(0, 2);
  } else {
    if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
    // PyYAML (YAML 1.1) reads 0755 as octal; refusing leading zeros avoids a silent disagreement.
    if (text.size() > 1 && text[0] == '0') return std::nullopt;
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  }
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Parses a YAML number (integer or float) into a double; .inf/.nan are refused up front since no
// field here has a use for them.
std::optional<double> parse_number(std::string text) {
  if (auto as_int = parse_unsigned(text)) return static_cast<double>(*as_int);
  if (text.empty() || text.find_first_not_of("0123456789+-.eE_") != std::string::npos)
    return std::nullopt;
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  if (!text.empty() && text.front() == '+') text.erase(0, 1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Reads one YAML document with typed accessors that report errors against the file.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail_at(const std::string& key, const std::string& what,
                            const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    fail(origin_, key, what, &mark);
  }

  // Checks that `node` is a mapping with only `allowed` keys (each once) and returns its entries.
  std::vector<std::pair<std::string, YAML::Node>> entries(const YAML::Node& node,
                                                          const std::string& path,
                                                          const std::vector<std::string_view>& allowed) const {
    if (!node.IsMap())
      fail_at(path, "expected a mapping with keys " + join(allowed) + ", got " + describe(node), node);
    std::vector<std::pair<std::string, YAML::Node>> out;
    std::set<std::string> seen;
    std::set<std::string> unknown;  // sorted, as V0.1 lists them
    YAML::Node first_unknown;
    for (const auto& item : node) {
      const std::string prefix = path.empty() ? "" : path + ".";
      if (!item.first.IsScalar())
        fail_at(path, "keys must be plain names, got " + describe(item.first), item.first);
      const std::string key = item.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        if (unknown.empty()) first_unknown = item.first;
        unknown.insert(key);
        continue;
      }
      if (!seen.insert(key).second) fail_at(prefix + key, "duplicate key", item.first);
      out.emplace_back(key, item.second);
    }
    if (!unknown.empty()) {
      // V0.1's words ("unknown fields in comm: a, b"), then a did-you-mean for a likely typo,
      // otherwise the whole list of what is allowed.
      std::vector<std::string_view> names(unknown.begin(), unknown.end());
      std::string hint = unknown.size() == 1 ? suggestion(*unknown.begin(), allowed) : "";
      if (hint.empty())
        hint = "; allowed keys" + (path.empty() ? std::string() : " in " + path) + ": " + join(allowed);
      fail_at("", "unknown fields in " + (path.empty() ? std::string("configuration") : path) + ": " +
                      join(names) + hint,
              first_unknown);
    }
    return out;
  }

  std::string string(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar() || node.Scalar().empty())
      fail_at(key, "expected a non-empty string, got " + describe(node), node);
    return node.Scalar();
  }

  // A name (node_id, host): a string, which a plain YAML number is not (V0.1 refuses
  // `node_id: 123`; `host: 12345` would fail only at listen or dial).
  std::string name(const YAML::Node& node, const std::string& key) const {
    if (is_plain_scalar(node) && parse_number(node.Scalar()))
      fail_at(key, "expected a string, got the number " + node.Scalar() + " (quote it if it is a name: '" +
                       node.Scalar() + "')", node);
    return string(node, key);
  }

  std::uint64_t unsigned_integer(const YAML::Node& node, const std::string& key,
                                 const char* expected = "a non-negative integer") const {
    std::optional<std::uint64_t> value;
    if (is_plain_scalar(node)) value = parse_unsigned(node.Scalar());
    if (!value) fail_at(key, std::string("expected ") + expected + ", got " + describe(node), node);
    return *value;
  }

  double number(const YAML::Node& node, const std::string& key) const {
    std::optional<double> value;
    if (is_plain_scalar(node)) value = parse_number(node.Scalar());
    if (!value || !std::isfinite(*value))
      fail_at(key, "expected a number, got " + describe(node), node);
    return *value;
  }

  bool boolean(const YAML::Node& node, const std::string& key) const {
    bool value = false;
    if (!is_plain_scalar(node) || !YAML::convert<bool>::decode(node, value))
      fail_at(key, "expected true or false, got " + describe(node), node);
    return value;
  }

  std::uint16_t port(const YAML::Node& node, const std::string& key, std::uint64_t lowest) const {
    const std::string range = "a port number " + std::to_string(lowest) + "..65535";
    std::optional<std::uint64_t> value;
    if (is_plain_scalar(node)) value = parse_unsigned(node.Scalar());
    if (!value || *value < lowest || *value > 65535)
      fail_at(key, "expected " + range + ", got " + describe(node), node);
    return static_cast<std::uint16_t>(*value);
  }

 private:
  std::string origin_;
};

// local: and each peers[i]: share the node_id / host / port fields; local also has bind_host.
// Instead of (or beside) host + port, a node may give `address:` (one URL) or `addresses:`
// (a list): tcp://host:port, unix:///path, unix://@name.
Peer read_peer(const Reader& r, const YAML::Node& node, const std::string& path, bool is_local,
               std::string* bind_host) {
  static const std::vector<std::string_view> local_keys = {"node_id", "host", "port", "address", "addresses",
                                                           "bind_host"};
  static const std::vector<std::string_view> peer_keys = {"node_id", "host", "port", "address", "addresses",
                                                          "transport"};
  Peer peer;
  bool has_id = false, has_host = false, has_port = false, has_address = false;
  auto add_address = [&](const YAML::Node& value, const std::string& field) {
    const std::string text = r.string(value, field);
    try {
      peer.addresses.push_back(Address::parse(text, is_local));
    } catch (const InvalidArgumentError& e) {
      r.fail_at(field, e.what(), value);
    }
  };
  for (const auto& [key, value] : r.entries(node, path, is_local ? local_keys : peer_keys)) {
    const std::string field = path + "." + key;
    if (key == "node_id") {
      peer.node_id = r.name(value, field);
      has_id = true;
    } else if (key == "host") {
      peer.host = r.name(value, field);
      has_host = true;
    } else if (key == "port") {
      // Port 0 asks the OS for an ephemeral port: meaningful for the local listener only.
      peer.port = r.port(value, field, is_local ? 0 : 1);
      has_port = true;
    } else if (key == "address") {
      if (has_address) r.fail_at(field, "give either 'address' or 'addresses', not both", value);
      add_address(value, field);
      has_address = true;
    } else if (key == "addresses") {
      if (has_address) r.fail_at(field, "give either 'address' or 'addresses', not both", value);
      if (!value.IsSequence() || value.size() == 0)
        r.fail_at(field, "expected a non-empty list of addresses, got " + describe(value), value);
      for (std::size_t i = 0; i < value.size(); ++i) add_address(value[i], field + "[" + std::to_string(i) + "]");
      has_address = true;
    } else if (key == "bind_host") {
      *bind_host = r.name(value, field);
    } else if (key == "transport") {
      peer.transport = r.string(value, field);
      if (!is_transport_choice(peer.transport))
        r.fail_at(field, "expected one of auto, shm, unix, tcp, ucx, got '" + peer.transport + "'", value);
    }
  }
  if (!has_id) r.fail_at(path, "missing required key 'node_id'", node);
  if (has_host != has_port)
    r.fail_at(path, std::string("missing required key '") + (has_host ? "port" : "host") + "'", node);
  if (!has_host && !has_address)
    r.fail_at(path, "missing required keys 'host' and 'port' (or 'address' / 'addresses')", node);
  return peer;
}

// Two nodes cannot listen on one address: a peer at one of the local node's addresses would
// have this node dial itself. (tcp port 0, an ephemeral local port, cannot clash.)
void check_addresses(const Reader& r, const NodeConfig& config, const YAML::Node& peers_node) {
  const std::vector<Address> local = config.local.endpoints();
  for (std::size_t i = 0; i < config.peers.size(); ++i) {
    const Peer& peer = config.peers[i];
    for (const Address& address : peer.endpoints()) {
      if (address.scheme == "tcp" && address.port == 0) continue;
      if (std::find(local.begin(), local.end(), address) == local.end()) continue;
      r.fail_at("peers[" + std::to_string(i) + "]",
                "'" + peer.node_id + "' has the same address as the local node '" + config.local.node_id + "' (" +
                    address.to_string() +
                    "); nodes on one host need distinct ports, e.g. local-node-a.yaml's 9201 and 9202",
                peers_node[i]);
    }
  }
}

// Every CommConfig field, by its exact C++ (and V0.1 Python) name.
const std::vector<std::string_view>& comm_keys() {
  static const std::vector<std::string_view> keys = {
      "max_message_bytes",        "max_manifest_bytes",           "max_metadata_bytes",
      "max_segments",             "max_container_depth",          "max_container_nodes",
      "max_peer_queued_messages", "max_peer_queued_bytes",        "max_peer_unreceived_messages",
      "max_peer_unreceived_bytes", "connect_timeout_s",           "allow_unsafe_pickle",
      "tcp_nodelay",              "egress_quantum_bytes",         "egress_rate_bytes_per_second",
      "egress_burst_bytes",       "recv_busy_poll_us",            "heartbeat_interval_s",
      "handshake_timeout_s",      "reconnect_backoff_initial_s",  "reconnect_backoff_max_s",
      "transport",                "cluster_key_file",             "max_pending_handshakes",
      "tls",                      "max_pending_handshakes_per_source",
      "egress_max_bulk_flows",    "chunk_bytes",                  "tcp_notsent_lowat_bytes",
      "tcp_max_pacing_rate_bytes_per_second", "tcp_target_queue_delay_us",
      "compression",              "accept_unknown_peers",         "allow_unauthenticated_joins",
      "max_peers"};
  return keys;
}

}  // namespace

std::string read_cluster_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgumentError("cannot read the cluster key file '" + path + "'");
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();  // a text key's newline
  if (key.size() < 16)
    throw InvalidArgumentError("the cluster key in '" + path + "' is " + std::to_string(key.size()) +
                               " bytes; it must be at least 16 (e.g. head -c 32 /dev/urandom | base64 > key)");
  return key;
}

namespace {

// Reads comm:, remembering where each field was so a validate() failure can point at it.
CommConfig read_comm(const Reader& r, const YAML::Node& node,
                     std::vector<std::pair<std::string, YAML::Mark>>* marks) {
  CommConfig c;
  for (const auto& [key, value] : r.entries(node, "comm", comm_keys())) {
    const std::string field = "comm." + key;
    marks->emplace_back(key, value.Mark());
    // The integer fields. A zero is let through here so that validate() reports it together
    // with the field's accepted range.
    std::uint64_t* integer_field = nullptr;
    if (key == "max_message_bytes") integer_field = &c.max_message_bytes;
    else if (key == "max_manifest_bytes") integer_field = &c.max_manifest_bytes;
    else if (key == "max_metadata_bytes") integer_field = &c.max_metadata_bytes;
    else if (key == "max_segments") integer_field = &c.max_segments;
    else if (key == "max_container_depth") integer_field = &c.max_container_depth;
    else if (key == "max_container_nodes") integer_field = &c.max_container_nodes;
    else if (key == "max_peer_queued_messages") integer_field = &c.max_peer_queued_messages;
    else if (key == "max_peer_queued_bytes") integer_field = &c.max_peer_queued_bytes;
    else if (key == "max_peer_unreceived_messages") integer_field = &c.max_peer_unreceived_messages;
    else if (key == "max_peer_unreceived_bytes") integer_field = &c.max_peer_unreceived_bytes;
    else if (key == "recv_busy_poll_us") integer_field = &c.recv_busy_poll_us;
    else if (key == "max_pending_handshakes") integer_field = &c.max_pending_handshakes;
    else if (key == "max_pending_handshakes_per_source") integer_field = &c.max_pending_handshakes_per_source;
    else if (key == "egress_max_bulk_flows") integer_field = &c.egress_max_bulk_flows;
    else if (key == "chunk_bytes") integer_field = &c.chunk_bytes;
    else if (key == "tcp_notsent_lowat_bytes") integer_field = &c.tcp_notsent_lowat_bytes;
    else if (key == "tcp_max_pacing_rate_bytes_per_second") integer_field = &c.tcp_max_pacing_rate_bytes_per_second;
    else if (key == "tcp_target_queue_delay_us") integer_field = &c.tcp_target_queue_delay_us;
    else if (key == "max_peers") integer_field = &c.max_peers;

    if (integer_field != nullptr) {
      *integer_field = r.unsigned_integer(value, field, "a positive integer");
    } else if (key == "connect_timeout_s") {
      c.connect_timeout_s = r.number(value, field);
    } else if (key == "heartbeat_interval_s") {
      c.heartbeat_interval_s = r.number(value, field);
    } else if (key == "handshake_timeout_s") {
      c.handshake_timeout_s = r.number(value, field);
    } else if (key == "reconnect_backoff_initial_s") {
      c.reconnect_backoff_initial_s = r.number(value, field);
    } else if (key == "reconnect_backoff_max_s") {
      c.reconnect_backoff_max_s = r.number(value, field);
    } else if (key == "transport") {
      c.transport = r.string(value, field);
    } else if (key == "tls") {
      for (const auto& [tls_key, tls_value] : r.entries(value, field, {"cert_file", "key_file", "ca_file"})) {
        std::string& target = tls_key == "cert_file" ? c.tls.cert_file
                              : tls_key == "key_file" ? c.tls.key_file
                                                      : c.tls.ca_file;
        target = r.string(tls_value, field + "." + tls_key);
        if (target.empty()) r.fail_at(field + "." + tls_key, "must name a PEM file", tls_value);
      }
    } else if (key == "compression") {
      c.compression = r.string(value, field);
    } else if (key == "cluster_key_file") {
      const std::string path = r.string(value, field);
      try {
        c.cluster_key = read_cluster_key_file(path);
      } catch (const InvalidArgumentError& e) {
        r.fail_at(field, e.what(), value);
      }
    } else if (key == "egress_quantum_bytes" || key == "egress_burst_bytes" ||
               key == "egress_rate_bytes_per_second") {
      // V0.1's egress keys: null (or an empty value) is their default; a value must be a
      // positive integer (a rate may be written as a whole float, e.g. 2.5e6). The struct
      // holds null as 0, so an explicit 0 is refused here.
      if (value.IsNull()) continue;
      std::optional<double> number;
      if (is_plain_scalar(value)) {
        if (auto as_int = parse_unsigned(value.Scalar())) number = static_cast<double>(*as_int);
        else if (key == "egress_rate_bytes_per_second") number = parse_number(value.Scalar());
      }
      if (!number || !(*number >= 1) || *number != std::floor(*number) || *number > 0x1p63)
        r.fail_at(field, key + " must be positive when configured: expected a positive integer or null, got " +
                             describe(value), value);
      if (key == "egress_rate_bytes_per_second") c.egress_rate_bytes_per_second = *number;
      else if (key == "egress_quantum_bytes") c.egress_quantum_bytes = static_cast<std::uint64_t>(*number);
      else c.egress_burst_bytes = static_cast<std::uint64_t>(*number);
    } else if (key == "allow_unsafe_pickle") {
      c.allow_unsafe_pickle = r.boolean(value, field);
    } else if (key == "tcp_nodelay") {
      c.tcp_nodelay = r.boolean(value, field);
    } else if (key == "accept_unknown_peers") {
      c.accept_unknown_peers = r.boolean(value, field);
    } else if (key == "allow_unauthenticated_joins") {
      c.allow_unauthenticated_joins = r.boolean(value, field);
    }
  }
  // V0.1: a null burst is one quantum.
  if (c.egress_burst_bytes == 0) c.egress_burst_bytes = c.egress_quantum_bytes;
  return c;
}

}  // namespace

void CommConfig::validate() const {
  if (auto problem = find_problem(*this))
    throw InvalidArgumentError("CommConfig." + problem->field + ": " + problem->message);
}

NodeConfig parse_node_config(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    // e.msg is the bare reason; e.mark its position (0-based).
    fail(origin, "", "not valid YAML: " + e.msg, &e.mark);
  }
  const Reader r(origin);
  static const std::vector<std::string_view> top_keys = {"local", "peers", "comm"};
  if (!root.IsMap())
    fail(origin, "", "expected a mapping with keys " + join(top_keys) + ", got " + describe(root));

  NodeConfig config;
  bool has_local = false, has_peers = false;
  YAML::Node peers_node;
  for (const auto& [key, value] : r.entries(root, "", top_keys)) {
    if (key == "local") {
      config.local = read_peer(r, value, "local", /*is_local=*/true, &config.bind_host);
      has_local = true;
    } else if (key == "peers") {
      peers_node = value;
      has_peers = true;
    } else if (key == "comm") {
      config.comm = parse_comm_config(value, origin);
    }
  }
  if (!has_local) fail(origin, "", "missing required key 'local'");
  // Every node lists its allowed peers (V0.1); `peers: []` is accepted for a lone node.
  if (!has_peers) fail(origin, "", "missing required key 'peers' (a list of {node_id, host, port})");
  if (config.bind_host.empty()) config.bind_host = config.local.host;

  if (!peers_node.IsSequence())
    r.fail_at("peers", "expected a list of {node_id, host, port}, got " + describe(peers_node),
              peers_node);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < peers_node.size(); ++i) {
    const YAML::Node item = peers_node[i];
    const std::string path = "peers[" + std::to_string(i) + "]";
    Peer peer = read_peer(r, item, path, /*is_local=*/false, nullptr);
    if (peer.node_id == config.local.node_id)
      r.fail_at(path + ".node_id",
                "duplicate node_id '" + peer.node_id + "': it is the local node's own node_id; list only remote peers",
                item);
    if (!ids.insert(peer.node_id).second)
      r.fail_at(path + ".node_id", "duplicate node_id '" + peer.node_id + "' (each peer is listed once)", item);
    config.peers.push_back(std::move(peer));
  }
  check_addresses(r, config, peers_node);
  return config;
}

CommConfig parse_comm_config(const YAML::Node& comm, const std::string& origin) {
  if (!comm || comm.IsNull()) return {};  // an empty `comm:` section keeps every default
  std::vector<std::pair<std::string, YAML::Mark>> marks;
  CommConfig config = read_comm(Reader(origin), comm, &marks);
  if (auto problem = find_problem(config)) {
    const YAML::Mark* mark = nullptr;
    for (const auto& [key, m] : marks)
      if (key == problem->field) mark = &m;
    fail(origin, "comm." + problem->field, problem->message, mark);
  }
  return config;
}

std::vector<Address> Peer::endpoints() const {
  std::vector<Address> out;
  if (!host.empty()) out.push_back(Address::tcp(host, port));  // V0.1's address first
  for (const Address& a : addresses)
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

Peer Peer::at(std::string node_id, std::vector<Address> addresses) {
  Peer p{std::move(node_id)};
  for (Address& a : addresses) {
    if (a.scheme == "tcp" && p.host.empty()) {
      p.host = a.host;
      p.port = a.port;
    } else {
      p.addresses.push_back(std::move(a));
    }
  }
  return p;
}

std::string Peer::network_host() const {
  for (const Address& a : endpoints())
    if (a.scheme == "tcp") return a.host;
  return {};
}

std::string Peer::endpoints_text() const {
  std::string out;
  for (const Address& a : endpoints()) out += (out.empty() ? "" : ", ") + a.to_string();
  return out;
}

NodeConfig load_node_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InvalidArgumentError(path + ": node config file not found");
  if (std::filesystem::is_directory(path, ec))
    throw InvalidArgumentError(path + ": is a directory, expected a YAML node config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgumentError(path + ": cannot open node config file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InvalidArgumentError(path + ": cannot read node config file");
  return parse_node_config(text.str(), path);
}

}  // namespace wcomm
