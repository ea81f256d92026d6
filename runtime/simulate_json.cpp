// The simulator's JSON summary: makespan, bubble fraction and per-stage figures, refusing
// numbers that JSON cannot carry.
#include <charconv>
#include <cmath>

#include "runtime/simulate.hpp"

namespace pipeworks {

namespace {

// Appends x in shortest round-trip form; false (appending nothing) if it is not finite.
bool put_number(std::string& out, double x) {
  if (!std::isfinite(x)) return false;
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, ec == std::errc() ? end : buf);
  return true;
}

error not_finite(const std::string& what, double x) {
  return make_error("simulate: " + what + " is " + std::to_string(x) +
                    ", which JSON cannot hold; the costs overflowed (scale the times down)");
}

}  // namespace

result<std::string> to_json(const simulation& sim) {
  std::string out = "{\"makespan\": ";
  if (!put_number(out, sim.makespan)) return not_finite("the makespan", sim.makespan);
  out += ", \"bubble_fraction\": ";
  if (!put_number(out, sim.bubble_fraction)) {
    return not_finite("the bubble fraction", sim.bubble_fraction);
  }
  out += ", \"stages\": [";
  for (std::size_t i = 0; i < sim.stages.size(); ++i) {
    const rank_stats& s = sim.stages[i];
    out += i ? ", {\"busy\": " : "{\"busy\": ";
    if (!put_number(out, s.busy)) {
      return not_finite("the busy time of stage " + std::to_string(i), s.busy);
    }
    out += ", \"peak_inflight\": " + std::to_string(s.peak_inflight);
    out += ", \"peak_versions\": " + std::to_string(s.peak_versions);
    out += ", \"peak_activation_bytes\": " + std::to_string(s.peak_activation_bytes) + "}";
  }
  out += "]}";
  return out;
}

}  // namespace pipeworks
