// The split a pipeline runs with before the planner exists: explicit first blocks (--split) or
// an even split of the blocks' FLOPs over p stages (--stages p). Pure functions of the costs.
#pragma once
#include <string_view>
#include <vector>

#include "ops/layers/layer_cost.hpp"
#include "base/result.hpp"

namespace pipeworks {

// Boundaries b[0] = 0 < b[1] < ... < b[stages] = costs.size(): contiguous ranges whose forward
// plus backward FLOPs are as even as possible (the largest stage is minimal). An error when
// there are fewer blocks than stages.
result<std::vector<int>> even_split(const std::vector<layer_cost>& costs, int stages);

// "0,3,6" (the first block of each stage) for a model of `blocks` blocks → boundaries
// {0, 3, 6, blocks}. An error that names the bad entry: not starting at 0, not increasing, past
// the last block, or a count other than `stages` (when stages > 0).
result<std::vector<int>> parse_split(std::string_view text, int blocks, int stages = 0);

// The FLOPs of blocks [b[s], b[s+1]) for each stage (forward plus backward, per sample).
std::vector<double> stage_flops(const std::vector<layer_cost>& costs, const std::vector<int>& b);

}  // namespace pipeworks
