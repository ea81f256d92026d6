// parse_host_port: "host:port" or "[v6]:port", with a whole port in 1..65535 (0 when allowed).
#include "base/host_port.hpp"

#include <charconv>

namespace pipeworks {

result<host_port> parse_host_port(std::string_view text, bool any_port) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return make_error(quoted + " is not HOST:PORT (for example 127.0.0.1:7000)");
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string_view::npos)
    return make_error(quoted + ": write an IPv6 host in brackets, as [::1]:7000");
  if (host.empty()) return make_error(quoted + " has no host before the ':'");
  for (char c : host)
    if (c <= ' ' || c == '/' || c == '\x7f')
      return make_error(quoted + ": the host holds a character a host name cannot");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535 ||
      (value == 0 && !any_port))
    return make_error(quoted + ": the port must be a whole number in " +
                      (any_port ? "0..65535 (0: any free port)" : "1..65535"));
  return host_port{std::string(host), static_cast<std::uint16_t>(value)};
}

std::string to_string(const host_port& a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

}  // namespace pipeworks
