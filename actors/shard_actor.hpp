// The all-reduce share of one replica of one replicated stage, in its rank's process (runs across
// processes with w > 1): a CAF shell around chunk_reducer, under ZeRO around owner_reducer
// (stage 2's gradient, and every stage's gather of updated tensors), and under cyclic's p2p
// reduce around chain_reducer (partial sums and new versions). Pieces and sums go to the
// other replicas' shares over the wire (UCX); the whole sum goes to the local rank.
#pragma once
#include <caf/all.hpp>

#include <memory>

#include "actors/wire.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// Waits for its shard_wiring; a failure goes to `driver` as a stage_failure. zero: the run
// plan's runtime.zero; reduce: its schedule.reduce (p2p: a shell around chain_reducer).
caf::actor spawn_shard(caf::actor_system& sys, int stage, int replica, int replicas,
                       caf::actor driver, std::shared_ptr<wire_link> link, int zero = 0,
                       reduce_mode reduce = reduce_mode::collective);

}  // namespace pipeworks
