// Re-cutting a checkpoint taken at a step boundary (a flush schedule's, or --schedule none's) for
// another layout: every tensor's weights and optimizer moments, by name, into the ranks and
// virtual stages of another plan, which then resumes bit for bit.
#pragma once
#include <vector>

#include "base/result.hpp"
#include "ops/model/model.hpp"
#include "runtime/checkpoint/rank_state.hpp"
#include "runtime/exec/rank_setup.hpp"

namespace pipeworks {

// The states of every rank of a checkpoint (rank order) of the run `from_run`, as the states of
// the ranks of `to` at the same step: replica 0's weights (the latest version) and each tensor's
// moments and update count, cut by to's boundaries; each rank positioned right after its last
// STEP of that step (a run of `none`: one rank, one stage). Nothing may be in flight: a
// microbatch held, a message, a partial gradient, an older weight version or an unreported loss
// is refused, naming the rank (an asynchronous schedule's checkpoint cannot be re-cut). `to` has
// the step's microbatches per replica, m.
// ZeRO (plan.zero > 0 with 2 or more replicas): a sharded checkpoint's replica keeps the moments
// of the tensors it owns only (shard_owners of its stage over from's replicas), so each tensor's
// moments are read from its owner's rank; when `to` is sharded, each replica's stages keep the
// moments and update count of the tensors it owns under to's layout and replicas, and none (no
// moments, 0 updates) of the others, as a run under to's zero records them.
template <class T>
result<std::vector<rank_state>> reshard(const model<T>& m, const lowered_run& from_run,
                                        const std::vector<rank_state>& from, const lowered_run& to);

}  // namespace pipeworks
