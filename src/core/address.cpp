// Address parsing and printing (tcp://host:port, ucx://host:port, unix:///path, unix://@name,
// and shm:// with the unix forms: a shared-memory connection is set up over a Unix socket there).
#include "wcomm/address.h"

#include <charconv>

#include "wcomm/errors.h"

namespace wcomm {
namespace {

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw InvalidArgumentError("bad address '" + std::string(text) + "': " + why +
                             " (expected tcp://host:port, ucx://host:port, unix:///path, unix://@name, shm:///path or shm://@name)");
}

// Longest path a sockaddr_un holds, less its terminating nul.
constexpr std::size_t kMaxUnixPath = 107;

}  // namespace

Address Address::tcp(std::string host, std::uint16_t port) {
  Address a;
  a.scheme = "tcp";
  a.host = std::move(host);
  a.port = port;
  return a;
}

Address Address::parse(std::string_view text, bool allow_port_zero) {
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) bad(text, "no scheme");
  Address a;
  a.scheme = std::string(text.substr(0, sep));
  std::string_view rest = text.substr(sep + 3);
  if (a.scheme == "tcp" || a.scheme == "ucx") {  // ucx: a UCP listener's socket address
    std::string_view host;
    std::string_view port;
    if (!rest.empty() && rest.front() == '[') {  // [v6]:port
      const auto close = rest.find(']');
      if (close == std::string_view::npos) bad(text, "unclosed '['");
      host = rest.substr(1, close - 1);
      if (close + 1 >= rest.size() || rest[close + 1] != ':') bad(text, "no port after ']'");
      port = rest.substr(close + 2);
    } else {
      const auto colon = rest.rfind(':');
      if (colon == std::string_view::npos) bad(text, "no port");
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (host.find(':') != std::string_view::npos) bad(text, "an IPv6 host must be written in [brackets]");
    }
    if (host.empty()) bad(text, "empty host");
    if (host.find('/') != std::string_view::npos) bad(text, "a " + a.scheme + " address has no path");
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
      bad(text, "port '" + std::string(port) + "' is not a number 0..65535");
    if (value == 0 && !allow_port_zero) bad(text, "port 0 is only for a listener asking for any free port");
    a.host = std::string(host);
    a.port = static_cast<std::uint16_t>(value);
  } else if (a.scheme == "unix" || a.scheme == "shm") {
    if (!rest.empty() && rest.front() == '@') {
      a.abstract = true;
      a.path = std::string(rest.substr(1));
      if (a.path.empty()) bad(text, "empty abstract socket name");
      if (a.path.size() + 1 > kMaxUnixPath) bad(text, "abstract name longer than 106 bytes");
    } else {
      if (rest.empty() || rest.front() != '/') bad(text, "a " + a.scheme + " path must be absolute (" + a.scheme + ":///path)");
      a.path = std::string(rest);
      if (a.path.size() > kMaxUnixPath) bad(text, "socket path longer than 107 bytes");
    }
    if (a.path.find('\0') != std::string::npos) bad(text, "nul byte in the path");
  } else {
    bad(text, a.scheme.empty() ? "empty scheme" : "unknown scheme '" + a.scheme + "'");
  }
  return a;
}

std::string Address::to_string() const {
  if (scheme == "unix" || scheme == "shm") return scheme + "://" + (abstract ? "@" + path : path);
  const bool v6 = host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace wcomm
