// The schedule validator: checks that a schedule's programs are complete, that sends and
// receives pair up, that every rank runs to the end without deadlock, and that optimizer updates
// and weight versions follow the schedule's rule. Linear time.
#pragma once
#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// Returns ok, or an error that names the first problem found and the rank and action involved:
//  - an action on the wrong device, an unknown stage, or a microbatch id outside 0 .. steps*m-1;
//  - an action twice; a B (or I) before its F on a stage; a W before its I; a SEND before the
//    action that produces what it sends; an OVERLAP_F_B not followed at once by an F of its
//    stage and a B or I of another microbatch;
//  - a microbatch never consumed (F without B, or I without W) or missing on some stage;
//  - in lowered schedules (schedule::lowered, or any SEND/RECV present): an unmatched send or
//    receive, or a compute action whose input comes from another device with no RECV before it;
//  - a deadlock, shown as a step x rank grid with the stuck action of each rank marked;
//  - per replica and virtual stage: not exactly params.steps STEPs (when steps_known), STEP k
//    before a backward (B, or W) of step k, for flush kinds an F of step k+1 before STEP k, a
//    REDUCE with w = 1, or with w > 1 not exactly one REDUCE before each STEP;
//  - a version table of the wrong shape (virtual stages x m*steps), a B version unlike its F's,
//    a version used before its STEP ran, or one against the kind's rule (flush and pipedream:
//    the STEPs of the stage before the F; pipedream-vs: stage 0's; 2bw: max(t-1, 0); cyclic and
//    2bw: a backward at most one version behind the newest).
// Sends are buffered; a RECV waits for its SEND; F(s) on another device than s-1 waits for it
// (through RECV_F once lowered); REDUCE s waits until every replica of stage s reaches it.
status validate(const schedule& s);

}  // namespace pipeworks
