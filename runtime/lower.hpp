// The lowering pass taking its schedule by value, so that a caller hands over the compute-only
// programs instead of holding both (the const& form is declared in runtime/schedule.hpp).
#pragma once
#include "runtime/schedule.hpp"

namespace pipeworks {

// Lowers `compute_only` in place, one rank's program at a time, and returns it.
schedule lower_communication(schedule&& compute_only);

}  // namespace pipeworks

namespace pipeworks {

// For global gradient clipping: on each rank, moves the STEPs of each step to where the last of
// them stands (keeping their order), so that when the first of them runs every stage of the rank
// has its final gradient and can send its norm. Flush schedules (interleaved steps a late stage
// before an early one on the same device) keep their semantics; validate() confirms it.
schedule gather_steps(schedule&& s);

}  // namespace pipeworks
