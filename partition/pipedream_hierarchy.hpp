// PipeDream's level-by-level program over a hierarchy of identical devices (servers of GPUs,
// racks of servers): inner optimal sub-pipelines become the stages of the level above.
#pragma once
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

// `levels` innermost first, at least two. A device-stage starting at layer i keeps in_flight[i]
// microbatches for the memory check (in_flight: one per layer, non-increasing, so that the memory
// of a range only grows with the range). m.in_flight and m.devices are not used. Nothing when no
// plan fits in memory.
std::optional<hierarchy_plan> plan_hierarchy(const flat_model& m, const std::vector<level_spec>& levels,
                                             const std::vector<int>& in_flight);

}  // namespace pipeworks::pipedream
