// "host:port" addresses of worker processes and drivers: parsed and checked once, printed back.
// An IPv6 host is written in brackets ("[::1]:7000").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace pipeworks {

struct host_port {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const host_port&) const = default;
};

// Port 0 (any free port) only when `any_port` allows it, as for a listening worker.
result<host_port> parse_host_port(std::string_view text, bool any_port = false);
std::string to_string(const host_port& a);

}  // namespace pipeworks
