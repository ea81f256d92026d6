// schedule_from_programs: wraps hand-written or imported programs (CSV, tests) in a schedule
// value, so that the validator and the simulator can take them like a generated one.
#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/schedule.hpp"
#include "runtime/version_rule.hpp"

namespace pipeworks {

namespace {

// device_of from the programs: each virtual stage runs on the device (rank % devices) whose row
// runs its forwards. A stage with forwards on two devices, or none, or a device that holds another
// number of stages than `chunks`, is refused, naming the stage and the rows.
result<std::vector<int>> placement_from_forwards(const std::vector<program>& programs, int devices,
                                                 int chunks) {
  const int stages = devices * chunks;
  std::vector<int> device_of(static_cast<std::size_t>(stages), -1), row_of(device_of);
  for (std::size_t r = 0; r < programs.size(); ++r)
    for (const action& a : programs[r]) {
      if (a.kind != action_kind::forward || a.stage >= stages) continue;
      const int d = static_cast<int>(r % static_cast<std::size_t>(devices));
      int& at = device_of[static_cast<std::size_t>(a.stage)];
      if (at >= 0 && at != d)
        return make_error("virtual stage " + std::to_string(a.stage) + " has forwards on row " +
                          std::to_string(row_of[static_cast<std::size_t>(a.stage)]) + " (device " +
                          std::to_string(at) + ") and on row " + std::to_string(r) + " (device " +
                          std::to_string(d) + "); a stage runs on one device: put all forwards of stage " +
                          std::to_string(a.stage) + " on one row");
      at = d;
      row_of[static_cast<std::size_t>(a.stage)] = static_cast<int>(r);
    }
  std::vector<int> held(static_cast<std::size_t>(devices), 0);
  for (int s = 0; s < stages; ++s) {
    if (device_of[static_cast<std::size_t>(s)] < 0)
      return make_error("virtual stage " + std::to_string(s) + " has no forward on any of the " +
                        std::to_string(programs.size()) + " rows, so no row says where it runs; "
                        "stages 0.." + std::to_string(stages - 1) + " each need their F actions");
    ++held[static_cast<std::size_t>(device_of[static_cast<std::size_t>(s)])];
  }
  for (int d = 0; d < devices; ++d)
    if (held[static_cast<std::size_t>(d)] != chunks) {
      std::string list;
      for (int s = 0; s < stages; ++s)
        if (device_of[static_cast<std::size_t>(s)] == d)
          list += (list.empty() ? "" : ", ") + std::to_string(s);
      return make_error("row " + std::to_string(d) + " (device " + std::to_string(d) +
                        ") runs the forwards of " + std::to_string(held[static_cast<std::size_t>(d)]) +
                        " virtual stages (" + (list.empty() ? std::string("none") : list) +
                        "), but " + std::to_string(stages) + " stages on " +
                        std::to_string(devices) + " devices give each " + std::to_string(chunks) +
                        "; give every device the same number of stages");
    }
  return device_of;
}

}  // namespace

result<schedule> schedule_from_programs(std::vector<program> programs, int devices, int chunks,
                                        int replicas, bool lowered, bool infer_placement) {
  if (devices < 1 || chunks < 1 || replicas < 1)
    return make_error("devices, chunks and replicas must be at least 1 "
                      "(got " + std::to_string(devices) + ", " + std::to_string(chunks) + ", " +
                      std::to_string(replicas) + ")");
  const long long ranks = static_cast<long long>(devices) * replicas;
  if (static_cast<long long>(programs.size()) != ranks)
    return make_error(std::to_string(programs.size()) +
                      " programs for " + std::to_string(devices) + " devices x " +
                      std::to_string(replicas) + " replicas; give one program per rank (" +
                      std::to_string(ranks) + ")");
  const long long virtual_stages = static_cast<long long>(devices) * chunks;
  if (virtual_stages > (1 << 24))
    return make_error(std::to_string(virtual_stages) +
                      " virtual stages (devices x chunks) is too many");
  // Every microbatch needs an F on every stage, so an id at or above the number of actions
  // cannot belong to a complete schedule; rejecting it bounds the tables sized by the ids.
  std::int64_t actions = 0;
  for (const program& p : programs) actions += static_cast<std::int64_t>(p.size());
  std::int64_t max_mb = -1;
  for (std::size_t r = 0; r < programs.size(); ++r)
    for (std::size_t pos = 0; pos < programs[r].size(); ++pos) {
      const action& a = programs[r][pos];
      if (!has_microbatch(a.kind)) continue;
      if (a.microbatch < 0 || a.microbatch >= actions)
        return make_error(to_string(a) + " (rank " +
                          std::to_string(r) + ", action " + std::to_string(pos) +
                          ") names microbatch " + std::to_string(a.microbatch) +
                          ", but the programs hold only " + std::to_string(actions) +
                          " actions, so ids must lie in 0.." + std::to_string(actions - 1) +
                          "; number microbatches 0, 1, 2, ... without gaps");
      max_mb = std::max<std::int64_t>(max_mb, a.microbatch);
    }
  // Steps: the most STEPs any (rank, virtual stage) runs; the validator checks each runs as many.
  std::int64_t steps = 0;
  std::vector<std::int64_t> per_stage(static_cast<std::size_t>(virtual_stages), 0);
  for (const program& p : programs) {
    std::fill(per_stage.begin(), per_stage.end(), 0);
    for (const action& a : p)
      if (a.kind == action_kind::step && a.stage >= 0 && a.stage < virtual_stages)
        steps = std::max(steps, ++per_stage[a.stage]);
  }
  const std::int64_t total = std::max<std::int64_t>(max_mb + 1, 1);
  if (steps > 0 && total % steps != 0)
    return make_error("microbatch ids 0.." + std::to_string(total - 1) +
                      " do not divide into " + std::to_string(steps) +
                      " steps (the STEP count per stage); every step needs the same number of "
                      "microbatches, so use a multiple of " + std::to_string(steps) + " ids");
  schedule s;
  s.kind = schedule_kind::gpipe;  // placeholder: custom_programs says there is no built-in kind
  s.custom_programs = true;
  s.steps_known = steps > 0;
  const int step_count = static_cast<int>(std::max<std::int64_t>(steps, 1));
  s.params = {devices, static_cast<int>(total / step_count), chunks, replicas, step_count};
  s.virtual_stages = static_cast<int>(virtual_stages);
  s.device_of.resize(s.virtual_stages);
  for (int v = 0; v < s.virtual_stages; ++v) s.device_of[v] = v % devices;
  if (infer_placement) {
    auto placed = placement_from_forwards(programs, devices, chunks);
    if (!placed) return placed.err();
    s.device_of = std::move(*placed);
  }
  s.programs = std::move(programs);
  s.lowered = lowered;
  s.versions = latest_versions(s);
  s.version_rule = "custom programs: each F uses its stage's latest version; B uses the same one";
  return s;
}

}  // namespace pipeworks
