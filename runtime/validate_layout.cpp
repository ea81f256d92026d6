// The validator's layout check; see validate_layout.hpp.
#include "runtime/validate_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace pipeworks::detail {

status check_layout(const schedule& s) {
  const int p = s.params.stages, w = s.params.replicas, stages = s.virtual_stages;
  const int ranks = s.ranks();
  const std::int64_t mbs =
      static_cast<std::int64_t>(s.params.microbatches) * std::max(s.params.steps, 0);
  if (p < 1 || w < 1 || stages < 1 || mbs < 0)
    return make_error("schedule layout: p, w and the virtual stage count must be at least 1 "
                      "(got p = " + std::to_string(p) + ", w = " + std::to_string(w) +
                      ", virtual stages = " + std::to_string(stages) + ")");
  if (s.routes < 1 || stages % s.routes != 0)
    return make_error("schedule layout: " + std::to_string(s.routes) + " routes over " +
                      std::to_string(stages) + " virtual stages; the routes must split the "
                      "virtual stages evenly (1, or 2 for dualpipe)");
  if (static_cast<int>(s.device_of.size()) != stages)
    return make_error("schedule layout: device_of has " + std::to_string(s.device_of.size()) +
                      " entries for " + std::to_string(stages) +
                      " virtual stages; give one device per virtual stage");
  for (int v = 0; v < stages; ++v)
    if (s.device_of[v] < 0 || s.device_of[v] >= p)
      return make_error("schedule layout: virtual stage " + std::to_string(v) +
                        " is placed on device " + std::to_string(s.device_of[v]) +
                        ", but there are only devices 0.." + std::to_string(p - 1));
  if (ranks != p * w)
    return make_error("schedule layout: " + std::to_string(ranks) + " programs for p = " +
                      std::to_string(p) + " devices x w = " + std::to_string(w) +
                      " replicas; give one program per rank (" + std::to_string(p * w) + ")");
  // A complete schedule runs an F of every microbatch on every stage of every replica, so the
  // programs hold at least w * stages * m * steps actions; this also bounds the tables below.
  std::int64_t actions = 0;
  for (const program& prog : s.programs) actions += static_cast<std::int64_t>(prog.size());
  const std::int64_t groups = static_cast<std::int64_t>(w) * stages;
  if (mbs > actions / groups)  // mbs * groups > actions, without overflow
    return make_error("schedule layout: m = " + std::to_string(s.params.microbatches) + " x " +
                      std::to_string(s.params.steps) + " steps on " + std::to_string(stages) +
                      " virtual stages x " + std::to_string(w) + " replicas needs an F per "
                      "microbatch, stage and replica, but the programs hold only " +
                      std::to_string(actions) + " actions; check m and the step count");
  return status::success();
}

}  // namespace pipeworks::detail
