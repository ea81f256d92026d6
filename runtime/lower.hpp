// The lowering pass taking its schedule by value, so that a caller hands over the compute-only
// programs instead of holding both (the const& form is declared in runtime/schedule.hpp).
#pragma once
#include "runtime/schedule.hpp"

namespace pipeworks {

// Lowers `compute_only` in place, one rank's program at a time, and returns it.
schedule lower_communication(schedule&& compute_only);

}  // namespace pipeworks
