// `pipeworks plan --planner v`: the V schedules' split (partition/v_planner) for people and as
// JSON, with the flags of the `train` that runs it.
#pragma once
#include <string>

#include "partition/cluster.hpp"
#include "partition/profile.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks::cli {

// Plans `kind` (a V schedule) for m microbatches per step over at most max_devices devices
// (0: the cluster's), prints it, and returns the exit code. A plan that cannot be made throws
// pipeworks_error naming why.
int print_v_plan(const model_profile& profile, const cluster& c, const std::string& cluster_name,
                 schedule_kind kind, int microbatches, int max_devices, bool json);

}  // namespace pipeworks::cli
