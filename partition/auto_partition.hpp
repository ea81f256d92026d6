// The plan at start-up (`train --auto-partition`): from a profile and a cluster
// to a local run's shape (stages, replicas, microbatches, split, each rank's throttled speed).
#pragma once
// Pure functions, no CAF: the plan must exist before any actor does (the schedule's p, w and m
// decide which actors to spawn), so train_pipeline's caller plans here, prints the plan, and the
// partition actor realises it (boundaries, weights, one throttled stage actor per rank).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/model/model.hpp"
#include "base/result.hpp"
#include "ops/train/microbatches.hpp"
#include "partition/cluster.hpp"
#include "partition/pipedream_planner.hpp"
#include "partition/profile.hpp"
#include "partition/v_planner.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/run_plan.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

struct auto_partition_request {
  planner_kind planner = planner_kind::pipedream;
  schedule_kind schedule = schedule_kind::one_f_one_b;
  // The step: batch B in `microbatches` microbatches of B / microbatches samples, the size the
  // profile was taken at. PipeDream keeps that size: its w replicas run microbatches / w each.
  // 2BW chooses b, m and w itself; with keep_batch its b·m·w must equal B.
  std::int64_t batch = 1;
  int microbatches = 1;
  bool keep_batch = false;
  int cores = 0;  // this machine's cores: the used devices' speeds must sum to at most this; 0: any
  // Profiles measured on other kinds of device (a GPU's), by the name a device's "profile"
  // gives: both planners time and size such a device by its own (load_device_profiles).
  std::map<std::string, model_profile> device_profiles;
};

struct auto_partition {
  planner_kind planner = planner_kind::pipedream;
  schedule_kind schedule = schedule_kind::one_f_one_b;
  std::vector<planned_stage> stages;  // the planner's stages (layers, replicas, devices, ms)
  int p = 1, w = 1, m = 1;            // the run: stages, replicas, microbatches per replica
  std::int64_t microbatch = 1;        // samples per microbatch
  std::int64_t batch = 1;             // samples per step: microbatch · m · w
  std::vector<int> boundaries;        // stage s runs blocks [b[s], b[s+1])
  std::vector<int> rank_device;       // per rank (replica · p + stage): the cluster's device
  std::vector<double> device_speed;   // per rank: cluster.speed of its device
  std::vector<std::string> device_names;  // per rank
  std::vector<named_device> run_devices;  // per rank: where it runs (its device's "device")
  double planner_step_ms = 0;         // the planner's own prediction (its assumptions)
  double simulated_step_ms = 0;       // the run's schedule simulated on the profile's costs
  // The plan's mode, the run's runtime.recompute: the profile's, or with a profile of several
  // modes the planner's choice, with each mode's outcome in recompute_choice ("" otherwise).
  recompute_mode recompute = recompute_mode::none;
  std::string recompute_choice;
  int zero = 0;  // the ZeRO level the planner counted memory with (run_plan::zero)
};

// Plans with PipeDream's planner (same replicas on every stage: the runtime replicates whole
// pipelines) or 2BW's. PipeDream's plan must share the step's microbatches evenly among its w
// replicas (w divides request.microbatches): when the best plan's w does not, the planner runs
// again on fewer devices until it does (w = 1 always does). Errors: a device faster than one core
// (speed > 1), a plan that replicates stages unevenly, a 2BW batch other than a kept --batch,
// devices whose speeds add up to more than `cores`, a schedule the run's p and m cannot run
// (saying how many microbatches it needs), and the planners' own.
result<auto_partition> plan_auto_partition(const model_profile& profile, const cluster& c,
                                           const auto_partition_request& request);

// A local run throttles CPU cores, so no CPU device may be faster than one (speed <= 1); a GPU
// device ("device": "cuda..") runs at its own pace, so its speed is 1 and its profile its own.
// The error names the device and what to do.
status check_local_speeds(const cluster& c);

// PipeDream's microbatches per step when none are given: 2 per device (so most replica counts
// share them evenly), or the largest divisor of batch below that, so that they split it evenly.
int default_microbatches(std::int64_t batch, int devices);

// Each stage's pace: the slowest speed among its replicas. rank_speed is per rank
// (replica · p + stage); the answer has p entries.
std::vector<double> slowest_replica_speeds(const std::vector<double>& rank_speed, int p);

// Profiles `net` on `sample` with one core (a oneTBB arena of one thread): the cost of a device
// of speed 1, as a throttled rank with one thread runs; measured in the run's recompute mode.
result<model_profile> profile_on_one_core(const model<float>& net, const minibatch& sample,
                                          recompute_mode recompute = recompute_mode::none);
// profile_on_one_core in none, selective and full, merged into one profile of three modes
// (merge_modes): the planners then choose the mode (recompute_choice.hpp).
result<model_profile> profile_every_mode_on_one_core(const model<float>& net,
                                                     const minibatch& sample);

// The simulator's costs of a pipeline cut at `boundaries` (stage s = blocks [b[s], b[s+1])):
// the profile's forward and backward times in seconds, scaled by `scale` (a microbatch size
// over the profile's), W = half of B (for split-backward schedules), no STEP time, free links
// (in-process messages pass by reference), and device s at speed stage_speed[s]. Each
// microbatch in flight stashes Σsaved, or under full recomputation the stage's input.
cost_model profile_costs(const model_profile& profile, const std::vector<int>& boundaries,
                         const std::vector<double>& stage_speed, double scale = 1.0);
// The same with each stage's own profile (its slowest replica's, by that device's profile).
cost_model profile_costs(const std::vector<const model_profile*>& stage_profile,
                         const std::vector<int>& boundaries,
                         const std::vector<double>& stage_speed, double scale);

// One step (p stages, m microbatches per replica, w replicas) of `kind` simulated on `costs`, in ms.
// A V schedule runs its two chunks per device.
result<double> simulate_step_ms(schedule_kind kind, int p, int m, int w, cost_model costs);

// The device of the plan's stage s: s, or in a V (2p stages) 2p-1-s for the second half.
inline int stage_device(const auto_partition& a, int s) { return s < a.p ? s : 2 * a.p - 1 - s; }

// The plan for people: a markdown table of the stages (layers, blocks, replicas, devices with
// their speeds, ms per microbatch), then the run's shape and both predicted step times.
std::string format_auto_partition(const auto_partition& plan, const model_profile& profile,
                                  const std::string& cluster_name);


}  // namespace pipeworks
