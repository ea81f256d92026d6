// A cost model from a measured run: per virtual stage, the mean measured F, B (or I and W) and
// STEP times, so the simulator can replay the same schedule with them (--compare-sim).
#pragma once
#include "runtime/cost_model.hpp"
#include "runtime/schedule.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

// One stage_cost per virtual stage of the plan, from the compute-stream events of `measured`
// (timeline_event::act.stage is the virtual stage; every replica's events count):
//   forward     = mean F
//   backward    = mean B, or mean I + mean W where the stage ran I or W (a split backward)
//   weight_grad = mean W (0 without W events)
//   step        = mean STEP
// A kind with no events gives 0. Communication and REDUCE are free, sizes 0, memory unlimited,
// so the simulated time is the compute the run measured plus the schedule's waits. Events with a
// stage outside the plan, or on send and receive streams, are ignored.
cost_model costs_from_timeline(const timeline& measured, const schedule& plan);

}  // namespace pipeworks
