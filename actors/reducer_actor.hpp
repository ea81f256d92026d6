// The reducer actor of one replicated virtual stage: a CAF shell around gradient_reducer that
// answers every replica's rank with the sum once all w gradients of a step have arrived.
#pragma once
#include <caf/all.hpp>

#include <memory>
#include <optional>

#include "actors/wire.hpp"
#include "ops/device/device.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// A failure (a duplicate or mismatched gradient) goes to `driver` as a stage_failure. With a
// link, sums to ranks of other processes go over it. With `gpu`, GPU gradients are summed there.
caf::actor spawn_reducer(caf::actor_system& sys, bool detached, int stage, int replicas,
                         reduce_mode mode, caf::actor driver,
                         std::shared_ptr<wire_link> link = nullptr,
                         std::optional<device> gpu = std::nullopt);

}  // namespace pipeworks
