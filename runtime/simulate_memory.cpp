// The simulator's helpers that turn numbers and byte counts into message text (its big arrays are
// on huge pages, runtime/huge_pages.cpp).
#include <cstdint>
#include <sstream>

#include "runtime/simulate_internal.hpp"

namespace pipeworks::sim_detail {

std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string bytes_text(double b) {
  std::ostringstream s;
  s.precision(4);
  if (b >= 1024.0 * (1 << 30)) s << b / (1024.0 * (1 << 30)) << " TiB";
  else if (b >= (1 << 30)) s << b / (1 << 30) << " GiB";
  else if (b >= (1 << 20)) s << b / (1 << 20) << " MiB";
  else s << static_cast<std::int64_t>(b) << " B";
  return s.str();
}

}  // namespace pipeworks::sim_detail
