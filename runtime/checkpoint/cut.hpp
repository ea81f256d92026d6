// The consistent cut of a checkpoint after step N: where each rank records its state (right after
// its own last STEP of step N), and the check that this cut is consistent for a lowered schedule.
#pragma once
#include <cstddef>
#include <vector>

#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// Per rank, the program position just after its last STEP with 0-based step index steps_done - 1
// (the step that makes version steps_done). A rank records its state when it reaches that position.
// An error when a rank has no such STEP (steps_done outside 1..params.steps).
result<std::vector<std::size_t>> checkpoint_cut(const schedule& lowered, int steps_done);

// Whether the cut is consistent, so that recording each rank at its position plus the messages in
// flight (Chandy–Lamport) gives a state the run can continue from: no RECV before its rank's cut
// whose SEND is after its sender's cut, and for every (stage, step) REDUCE either all replicas'
// are before their cuts or none. The error names the first violation.
status check_cut(const schedule& lowered, const std::vector<std::size_t>& cut);

}  // namespace pipeworks
