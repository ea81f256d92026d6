// PipeDream's level-by-level program over a hierarchy of identical devices (servers of GPUs,
// racks of servers): inner optimal sub-pipelines become the stages of the level above.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "partition/pipedream_flat.hpp"

namespace pipeworks::pipedream {

struct level_spec {
  int count = 1;           // units of the level below in one unit of this level (≥ 2)
  double ms_per_byte = 0;  // 1000 / bandwidth between those units
};

struct hierarchy_plan {
  std::vector<planned_stage> stages;  // device-level, flattened (see the .cpp)
  double bottleneck_ms = 0;           // A at the top level for all layers
};

// The tables below the top level cost about c_l² per row of level l (rows: one per layer range
// the level above asks about, up to L² of them); work_budget counts those c_l² and is shared by
// the calls of one planning (plan_levels). 2^25 is about a second.
constexpr std::int64_t hierarchy_work_budget = std::int64_t{1} << 25;

struct hierarchy_outcome {
  std::optional<hierarchy_plan> plan;  // nothing: no plan fits in memory, or over_budget
  bool over_budget = false;            // the work budget ran out first; no answer either way
};

// `levels` innermost first, at least two. A device-stage starting at layer i keeps in_flight[i]
// microbatches for the memory check. in_flight has one entry per layer and must not increase
// with i (the program stops a range's growth at the first layer that does not fit, which is
// only right when a range's memory grows with the range); plan_levels builds it so, and it is
// asserted. m.in_flight and m.devices are not used. work_budget is spent by the rows computed
// (see hierarchy_work_budget).
hierarchy_outcome plan_hierarchy(const flat_model& m, const std::vector<level_spec>& levels,
                                 const std::vector<int>& in_flight, std::int64_t& work_budget);

}  // namespace pipeworks::pipedream
