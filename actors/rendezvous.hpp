// The driver's side of a launcher's start (torchrun, srun): worker processes that know their
// rank and the world size from the environment join at the driver's address and say where they
// listen; the driver then connects to them as to --workers.
#pragma once
#include <caf/all.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "base/host_port.hpp"
#include "base/result.hpp"

namespace pipeworks {

// Listens at `at` until `world_size` workers have joined (within `limit`): their addresses by
// rank. Errors name the ranks that did not join; a joining worker whose rank, world size or
// protocol does not fit is refused, naming the field, and the others keep waiting.
result<std::vector<std::string>> await_workers(caf::actor_system& sys, const host_port& at,
                                               int world_size, std::chrono::milliseconds limit);

}  // namespace pipeworks
