// ZeRO stage 1 over the replicas of a stage: which replica owns (updates, and keeps the optimizer
// moments of) each tensor, and the new version put together from the owners' updates.
#pragma once
#include <vector>

#include "base/result.hpp"
#include "ops/model/param_set.hpp"

namespace pipeworks {

// The owner (0..replicas-1) of each tensor of the layout, in entry order: whole tensors, the
// largest first, each to the replica that owns the fewest elements so far (the lowest index on a
// tie), so every replica keeps about 1/replicas of the moments. Deterministic: every replica
// computes the same owners.
std::vector<int> shard_owners(const param_set& layout, int replicas);

// The marks stage_optimizer::own_only takes for replica r.
std::vector<bool> owned_by(const std::vector<int>& owners, int r);

// The new version: each tensor from its owner's (by_replica[owners[i]]). The updates are
// elementwise, so this has the bits of one optimizer updating every tensor. Host param_sets of
// one layout; an error names a layout that differs.
result<param_set> compose_shards(const std::vector<param_snapshot>& by_replica,
                                 const std::vector<int>& owners);

}  // namespace pipeworks
