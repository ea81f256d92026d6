// schedule_from_programs: wraps hand-written or imported programs (CSV, tests) in a schedule
// value, so that the validator and the simulator can take them like a generated one.
#include <algorithm>
#include <string>

#include "runtime/schedule.hpp"
#include "runtime/version_rule.hpp"

namespace pipeworks {

result<schedule> schedule_from_programs(std::vector<program> programs, int devices, int chunks,
                                        int replicas, bool lowered) {
  if (devices < 1 || chunks < 1 || replicas < 1)
    return make_error("schedule_from_programs: devices, chunks and replicas must be at least 1 "
                      "(got " + std::to_string(devices) + ", " + std::to_string(chunks) + ", " +
                      std::to_string(replicas) + ")");
  const long long ranks = static_cast<long long>(devices) * replicas;
  if (static_cast<long long>(programs.size()) != ranks)
    return make_error("schedule_from_programs: " + std::to_string(programs.size()) +
                      " programs for " + std::to_string(devices) + " devices x " +
                      std::to_string(replicas) + " replicas; give one program per rank (" +
                      std::to_string(ranks) + ")");
  int max_mb = -1;
  for (const program& p : programs)
    for (const action& a : p) max_mb = std::max(max_mb, a.microbatch);
  schedule s;
  s.kind = schedule_kind::gpipe;  // no built-in kind; the programs say everything
  s.params = {devices, std::max(max_mb + 1, 1), chunks, replicas, 1};
  s.virtual_stages = devices * chunks;
  s.device_of.resize(s.virtual_stages);
  for (int v = 0; v < s.virtual_stages; ++v) s.device_of[v] = v % devices;
  s.programs = std::move(programs);
  s.lowered = lowered;
  s.versions = latest_versions(s);
  s.version_rule = "custom programs: each F uses its stage's latest version; B uses the same one";
  return s;
}

}  // namespace pipeworks
