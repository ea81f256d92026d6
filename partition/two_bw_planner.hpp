// PipeDream-2BW's planner: chooses pipeline depth p, data-parallel width w, microbatch size b and
// microbatches per step m (m >= p), cuts the layers into p contiguous stages balanced on time,
// checks each device's memory (two weight versions, gradients, optimizer state, the activation
// stash) and scores the candidates with an analytic cost model, refining the best ones with the
// simulator running the 2BW schedule. A pure function of its inputs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/pipedream_planner.hpp"  // planned_stage
#include "partition/profile.hpp"

namespace pipeworks {

struct two_bw_plan {
  int p = 1;  // pipeline depth (stages)
  int w = 1;  // data-parallel width (replicas of the whole pipeline)
  std::int64_t b = 1;  // samples per microbatch
  int m = 1;  // microbatches per optimizer step, per replica (always >= p)
  // stages[s].devices[r]: the device replica r runs stage s on. On a hierarchy of levels it is
  // r·p + s (a replica's stages are consecutive devices, so its pipeline links stay inside a
  // server when p fits in one). On a device list the devices are sorted (fastest first, then most
  // memory; or most memory first, then fastest: both are tried) and dealt in groups of w, the
  // first group to stage 0: the replicas of a stage have similar speeds, so no replica (they
  // synchronise every step) is all slow devices. Only the first p·w devices in that order serve.
  // time_ms: the stage's compute time per microbatch at b on its slowest replica (each replica by
  // its device's own profile, when it names one); memory_bytes: the per-device estimate (every
  // replica holds the same, or with device profiles the largest of its replicas').
  std::vector<planned_stage> stages;
  double throughput_samples_per_s = 0;  // b·m·w / step_ms, from the simulator when `simulated`
  double step_ms = 0;                   // time per optimizer step (see two_bw_options)
  double analytic_step_ms = 0;          // the analytic model's step time
  double bottleneck_ms = 0;             // the slowest stage or link per microbatch (analytic)
  bool simulated = false;               // step_ms came from the simulator
  int inter_server_links = 0;           // pipeline links (over all replicas) above level 0
  // Indexed by the cluster's device number: entry d is device d's estimate, 0 for a device the
  // plan does not use; it ends at the highest-numbered device used (later devices are unused).
  // The same meaning as pipeline_plan::memory_bytes and `pipeworks plan --json`'s "memory_bytes".
  std::vector<std::int64_t> memory_bytes;
  std::int64_t max_memory_bytes = 0;  // the largest entry of memory_bytes
  // The profile's mode: what memory_bytes assumes, and what the run must do (runtime.recompute).
  recompute_mode recompute = recompute_mode::none;
  // With a profile of several modes: each mode's outcome and the choice (recompute_choice.hpp);
  // "" with a profile of one mode.
  std::string recompute_choice;
  // ZeRO's level the plan assumes (run_plan::zero; 0 with one replica): plan_two_bw chooses 1
  // when it makes a faster plan fit (memory_bytes then counts each replica's share).
  int zero = 0;
};

struct two_bw_options {
  int max_devices = 0;      // 0: all of the cluster's
  bool use_simulator = true;
  int simulate_top = 8;     // how many of the best analytic candidates the simulator re-scores
  // Candidates whose simulation would take more actions than this keep their analytic score.
  std::int64_t max_simulated_actions = std::int64_t{1} << 21;
  // Profiles of the same model measured on other kinds of device (a GPU's), by the name a
  // device's `profile` gives: such a device's times and saved bytes come from its own profile
  // (as pipedream_options::device_profiles). Every name a device gives must be here.
  std::map<std::string, model_profile> device_profiles;
};

// Scaling assumption: the profile was taken at profile.microbatch samples; at microbatch size b
// every layer's fwd_ms, bwd_ms, activation_bytes and saved_bytes scale linearly by
// b / profile.microbatch (parameter and optimizer bytes do not depend on b).
//
// Memory per device at stage s (0-based) of a p-stage pipeline:
//   2·Σparam (two weight versions) + Σparam (gradients) + Σoptimizer
//   + (p − s)·Σsaved(b)   (2BW's 1F1B stash: stage 0 holds p microbatches in flight)
// with the profile's recompute mode as the runtime holds it: none and selective as above
// (selective's saved_bytes are already the reduced stash); full (2BW's recomputation)
//   + (p − s)·input(b) + Σsaved(b)   (each microbatch in flight keeps only the stage's input,
//                                     input_bytes of its first layer; one backward at a time runs
//                                     the forward again and holds its whole stash).
// A plan made from the profile runs in its mode (the run plan's runtime.recompute).
//
// Split: contiguous stages minimising max_s Σ(fwd+bwd) / speed_s (speed_s: the slowest replica's);
// when that split does not fit every device's own memory, the best split that does (so a device
// with less memory takes fewer layers); when none does, the candidate does not fit.
//
// Device profiles (options.device_profiles, a device's `profile`): a device that names one takes
// its Σ(fwd+bwd) and saved bytes from it, so stage_s = max over its replicas of Σ(fwd+bwd) by the
// replica's profile / its speed, each device's memory is by its own profile, and the split
// minimises that max. Devices are ordered by speed × (the model's time by the plan's profile /
// by the device's own). The simulator then runs each stage at its slowest replica's figures and
// leaves memory to this estimate.
//
// Analytic step time (ms):
//   m · max(max_s stage_s, max_s link_s)  +  max_s allreduce_s
//   stage_s     = Σ(fwd+bwd)(b) over the stage's layers / speed of its slowest replica's device
//   link_s      = 2·activation_bytes(b) of stage s's last layer / bandwidth + 2·latency, on the
//                 slowest replica's link between the devices of stages s and s+1
//   allreduce_s = 2(w−1)/w · Σparam_s / bandwidth + 2(w−1)·latency, on the slowest link of the
//                 ring over stage s's replicas (0 for w = 1)
// Simulated step time: makespan / 2 of the 2BW schedule {p, m, 1, w, steps = 2} on a cost model
// built from the same figures (fill and drain included, so deeper pipelines pay for them).
// Throughput = b·m·w / step time. The best of simulate_top candidates by analytic throughput are
// simulated; the plan is the best simulated one (or the best analytic one with no simulation).
// Ties (within 1e-9 relative) go to fewer inter-server pipeline links, then fewer devices, then
// shallower pipelines.
//
// The model is candidate_cost.hpp's, shared with the baselines (baselines.hpp) under 2BW's rules.
// The profile's byte totals must pass check_profile_totals (at most 2^50 bytes per field).
//
// An error when no candidate fits, naming the device and saying by how much the smallest one
// exceeds its memory, and what to try.
//
// A profile of several modes (profile_modes): planned in each (device profiles in the same mode);
// the plan of the highest throughput_samples_per_s that fits wins, with its mode, and a tie goes
// to less recomputation (choose_recompute). evaluate_two_bw plans in the profile's own mode.
result<two_bw_plan> plan_two_bw(const model_profile& profile, const cluster& c,
                                const two_bw_options& options = {});

// The plan for one configuration (p, w, b, m), scored as plan_two_bw scores it (simulated when
// options.use_simulator and within max_simulated_actions). An error if it does not fit in memory
// (with the excess) or the configuration is invalid (m < p, p > layers, p·w > devices, b < 1).
result<two_bw_plan> evaluate_two_bw(const model_profile& profile, const cluster& c, int p, int w,
                                    std::int64_t b, int m, const two_bw_options& options = {});

}  // namespace pipeworks
