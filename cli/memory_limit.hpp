// --memory-limit BYTES: before anything trains, each rank's predicted peak (runtime/memory_plan:
// weights and their versions, gradients, optimizer moments, stashed activations) against the
// limit (a GPU rank's device bytes: offload counts apart what it moves to the host); a rank
// that does not fit is refused, naming what would make it fit.
#pragma once
#include <cstdint>
#include <string>

#include "ops/model/model.hpp"
#include "runtime/memory_plan.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks::cli {

// Accepts 1073741824, 1G, 512M, 64K, 1.5G (powers of 1024); an error names the text.
result<std::int64_t> parse_bytes(const std::string& text);

// Throws CLI::ValidationError("--memory-limit") when a rank's predicted peak passes `limit`,
// naming the rank, its stages, the predicted bytes by kind, and the figure of each --recompute
// mode and, with replicas, of --zero 1, and when every rank is on a GPU, of each --offload. A GPU
// rank's figure is its device's bytes: what offload moves to host memory is named apart.
// A plan whose split the planner chooses (--auto-partition) is checked by the planner instead.
void check_memory_limit(const run_plan& plan, const model<float>& net, std::int64_t limit);

// What each virtual stage of a resolved pipeline plan (its split chosen) is predicted to hold, by
// the accounting check_memory_limit uses (a GPU rank's stages with the plan's offload applied);
// empty for --schedule none. train --json reports it
// beside the measured peaks.
std::vector<stage_memory> predict_stages(const run_plan& plan);

}  // namespace pipeworks::cli
