// The split a pipeline runs with before the planner exists, when --split does not give one: an
// even split of the blocks' FLOPs over p stages (--stages p). Pure functions of the costs.
#pragma once
#include <vector>

#include "ops/layers/layer_cost.hpp"
#include "base/result.hpp"

namespace pipeworks {

// Boundaries b[0] = 0 < b[1] < ... < b[stages] = costs.size(): contiguous ranges whose forward
// plus backward FLOPs are as even as possible (the largest stage is minimal). An error when
// there are fewer blocks than stages.
result<std::vector<int>> even_split(const std::vector<layer_cost>& costs, int stages);

// The FLOPs of blocks [b[s], b[s+1]) for each stage (forward plus backward, per sample).
std::vector<double> stage_flops(const std::vector<layer_cost>& costs, const std::vector<int>& b);

}  // namespace pipeworks
