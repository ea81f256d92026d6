// The driver's side of a launcher's start (torchrun, srun): worker processes that know their
// rank and the world size from the environment join at the driver's address and say where they
// listen; the driver then connects to them as to --workers.
#pragma once
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/host_port.hpp"
#include "base/result.hpp"
#include "runtime/transport/frame_guard.hpp"

namespace pipeworks {

// Listens at `at` (through a frame guard) until `world_size` workers have joined (within
// `limit`): their addresses by rank. Errors name the ranks that did not join; a joining worker
// whose rank, world size or protocol does not fit is refused, naming the field, and the others
// keep waiting. `guard` receives the frame guard: CAF goes on using the workers' connections to
// it for the run, so it must live as long as the run. `kept` receives the rendezvous actor, which
// the joined workers monitor: it must live until the workers hold their ranks (the run's end),
// and end with end_rendezvous; while they hold none, its end tells them the driver gave up, and
// they exit at once. When not every worker joined, it ends here with the error.
result<std::vector<std::string>> await_workers(caf::actor_system& sys, const host_port& at,
                                               int world_size, std::chrono::milliseconds limit,
                                               std::unique_ptr<frame_guard>& guard, caf::actor& kept);

// Ends the rendezvous actor `kept` (if any) with `why` ("" once the run ended normally).
void end_rendezvous(caf::actor& kept, const std::string& why);

}  // namespace pipeworks
