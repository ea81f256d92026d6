// Cutting a whole model's parameters into the param_sets of its stages, and joining the stages'
// snapshots back into one param_set (for checkpoints and for serving the whole model).
#pragma once
#include <vector>

#include "ops/model/param_set.hpp"
#include "base/result.hpp"

namespace pipeworks {

// boundaries: b[0] = whole.first_block() < b[1] < ... < b.back() = whole.end_block(); stage s
// gets blocks [b[s], b[s+1]) as a param_set of its own (a copy). An error for bad boundaries.
result<std::vector<param_set>> split_params(const param_set& whole, const std::vector<int>& boundaries);

// The stages' parameters, contiguous and in block order, as one param_set (a copy). An error
// when they do not line up (a gap, an overlap, mixed dtypes).
result<param_set> join_params(const std::vector<param_snapshot>& stages);

}  // namespace pipeworks
