// The validator's checks of optimizer updates and weight versions (STEP, REDUCE and the version
// table); internal to validate.cpp, which runs them once the programs are otherwise sound.
#pragma once
#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks::detail {

// Assumes placement, ranges and F/backward completeness were checked. Per replica and virtual
// stage: exactly params.steps STEPs (when steps_known); STEP k after every backward (B, or W for
// split ones) of step k's microbatches; for flush kinds also before any F of step k+1; REDUCE only
// when w > 1, then exactly one before each STEP. The version table: its shape, B using F's
// version, every version existing when its F runs, and the kind's rule (flush and latest: the
// STEPs of the stage before the F; vertical sync: those of stage 0; 2bw: max(t-1, 0); cyclic and
// 2bw: at most two versions live, so a backward's version is at most one behind the newest).
status validate_updates(const schedule& s);

}  // namespace pipeworks::detail
