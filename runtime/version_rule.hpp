// Version tables: which weight version each (virtual stage, microbatch) uses, for the rules of
// DESIGN.md §1 (synchronous, latest-at-forward with stashing, vertical sync, delayed by one step).
#pragma once
#include <vector>

#include "runtime/schedule.hpp"

namespace pipeworks {

using version_table = std::vector<std::vector<version_use>>;  // [virtual stage][microbatch id]

// Synchronous: microbatch id mb belongs to step mb / m and uses that step's version.
version_table flush_versions(int virtual_stages, int microbatches, int steps);

// Weight stashing: F(s, mb) uses the number of STEP(s) that come before it in its rank's program
// (replica 0's); B, I and W use the same version. Microbatches with no F keep version 0.
version_table latest_versions(const schedule& s);

// Vertical sync: every stage uses the version that stage 0 used for the same microbatch.
version_table vertical_sync_versions(const version_table& latest);

// One step of delay (PipeDream-2BW): microbatch id mb of step t = mb / m uses max(t - 1, 0).
version_table delayed_versions(int virtual_stages, int microbatches, int steps);

}  // namespace pipeworks
