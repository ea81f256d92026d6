// Helpers every schedule generator shares: argument checks, an empty schedule with its layout,
// optimizer updates after each step's backwards, copying programs to the replicas, and the
// common ending of flush schedules.
#pragma once
#include <cstddef>
#include <string_view>

#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks::schedules {

// Checks p, m, v, w and steps for generator `name`; `allows_chunks` is false for schedules with
// one chunk per device. The message says which value is wrong and what would work.
status check_params(std::string_view name, const schedule_params& params, bool allows_chunks);
// check_params for a V schedule, whose chunk count must be 2.
status check_v_params(std::string_view name, const schedule_params& params);

// A schedule with no actions yet: kind, params, p * v virtual stages, virtual stage s on device
// s % p (on device s or 2p-1-s for the V schedules and dualpipe), the kind's routes, and p * w
// empty programs.
schedule start_schedule(schedule_kind kind, const schedule_params& params);

// Reserves room in each of replica 0's programs for `compute` F, B, I and W actions, the
// updates (a REDUCE and a STEP per virtual stage and step) and the SEND/RECV pairs that lowering
// may add (at most one RECV and one SEND per action), so that neither add_updates nor
// lower_communication moves a program. Room that is never written takes no memory.
void reserve_programs(schedule& s, std::size_t compute);

// Appends F or B of (stage, microbatch) to a program.
inline void add(program& p, int stage, action_kind kind, int microbatch) {
  p.push_back(action{stage, kind, microbatch});
}

// Appends the 1F1B order of `stage` (of `stages`) for microbatches first .. first + count - 1:
// min(stages - stage - 1, count) warm-up forwards, then F and B alternating, then the remaining Bs.
void add_one_f_one_b(program& p, int stage, int stages, int first, int count);

// Adds the optimizer update of each virtual stage, [REDUCE s when w > 1 or the stage has a copy
// on another route] then STEP s, right after
// the m-th backward (B, or W for split backwards) of that stage in each step, in replica 0's
// programs, in place (within the room reserve_programs made). Microbatch id mb belongs to step
// mb / m.
void add_updates(schedule& s);

// Copies replica 0's programs (ranks 0 .. p-1), with their room, to replicas 1 .. w-1; microbatch
// ids stay local.
void replicate(schedule& s);

// Ends a schedule that flushes every step: add_updates, replicate, then the synchronous version
// table and rule (every microbatch of step t uses version t on every stage).
void finish_flush_schedule(schedule& s);

}  // namespace pipeworks::schedules
