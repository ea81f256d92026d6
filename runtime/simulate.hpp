// The discrete-event simulator: runs a lowered schedule on a cost model and reports the makespan,
// the bubble fraction, per-stage busy time and peaks (in-flight microbatches, activations, weight
// versions), and a timeline for the trace writers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/schedule.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

struct simulate_options {
  bool record_timeline = true;  // off for benchmarks: a timeline holds one event per action
  std::string title;            // the timeline's title; empty: "<schedule> p=.. m=.. (simulated)"
};

// What one rank (or, in simulation::stages, one device over its replicas) did.
struct rank_stats {
  double busy = 0.0;                       // time running F, B, I, W, STEP and REDUCE
  int peak_inflight = 0;                   // microbatches whose F ran, last backward not yet
  std::int64_t peak_activation_bytes = 0;  // stashed activations at the peak
  int peak_versions = 0;                   // live weight versions, most of any virtual stage here
  std::int64_t peak_memory_bytes = 0;      // activations plus live weight versions
  double finish = 0.0;                     // when its last action ended
};

struct simulation {
  double makespan = 0.0;
  double bubble_fraction = 0.0;    // idle device time / (ranks * makespan)
  std::vector<rank_stats> ranks;   // per rank (replica * p + device)
  std::vector<rank_stats> stages;  // per device 0..p-1: busy and peaks are the max over replicas
  std::int64_t actions = 0;        // actions simulated
  timeline trace;                  // one event per action (empty with record_timeline off)
};

// Each rank runs its program in order. Compute actions (F, B, I, W), STEP and REDUCE occupy the
// rank. A SEND is asynchronous: it does not occupy the compute stream; the rank's send stream
// carries one message at a time for bytes/bandwidth, and the data arrives `latency` later. A
// RECV blocks the rank until its data has arrived. REDUCE waits for every replica of its stage
// and then takes the REDUCE time on all of them. With free communication (latency 0, infinite
// bandwidth) sends and receives cost nothing.
//
// Errors: deadlock (a picture of each rank's program around where it is stuck), an action that
// runs before its input (a missing RECV or a B before its F), a version the table names before
// its STEP has run, a device that runs out of memory (naming the stage and the time), a version
// table of the wrong shape, microbatch ids far beyond the action count, state larger than
// memory_limit_bytes(), byte counts that overflow 64 bits and times that overflow to infinity.
result<simulation> simulate(const schedule& lowered, const cost_model& costs,
                            const simulate_options& options = {});

// {"makespan": .., "bubble_fraction": .., "stages": [{"busy": .., "peak_inflight": ..,
//  "peak_versions": .., "peak_activation_bytes": ..}, ...]}, numbers in shortest round-trip form.
// An error, naming the number, if one is not finite (JSON has no inf or nan).
result<std::string> to_json(const simulation& sim);

// What simulating a built-in schedule would take, estimated from its parameters before it is
// generated: its actions after lowering, and the bytes of the compute-only and lowered programs,
// the version table, the simulator's per-(replica, stage, microbatch) state and, with a
// timeline, one event per action. Without `simulated`, the programs and their printed text.
struct footprint {
  std::int64_t actions = 0;
  double bytes = 0.0;
};
constexpr std::int64_t max_simulated_actions = std::int64_t{1} << 28;
footprint estimate_footprint(schedule_kind kind, const schedule_params& params, bool simulated,
                             bool record_timeline);
// The memory the simulator lets itself plan for: 3/4 of this machine's physical memory.
std::int64_t memory_limit_bytes();
// An error when the estimate is over max_simulated_actions or memory_limit_bytes(), saying how
// much it would need and the largest p * m that fits (with the same v, w and steps).
status check_footprint(schedule_kind kind, const schedule_params& params, bool simulated,
                       bool record_timeline);

}  // namespace pipeworks
