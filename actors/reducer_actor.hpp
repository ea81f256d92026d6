// The reducer actor of one replicated virtual stage: a CAF shell around gradient_reducer that
// answers every replica's rank with the sum once all w gradients of a step have arrived.
#pragma once
#include <caf/all.hpp>

namespace pipeworks {

// A failure (a duplicate or mismatched gradient) goes to `driver` as a stage_failure.
caf::actor spawn_reducer(caf::actor_system& sys, bool detached, int stage, int replicas,
                         caf::actor driver);

}  // namespace pipeworks
