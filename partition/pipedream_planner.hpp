// PipeDream's planner: a dynamic program over contiguous layer ranges and the levels of the
// cluster's hierarchy, with stage replication, minimising the slowest stage or link (the
// pipeline's bottleneck) within each device's memory. A pure function of its inputs.
#pragma once
#include <map>
#include <string>
#include <cstdint>
#include <vector>

#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/profile.hpp"

namespace pipeworks {

// A device-level stage. On a hierarchy a stage of an outer level replicated over r units runs an
// inner pipeline in each unit, so an inner stage's layers sit on r₀ devices in each of the r units:
// `replicas` counts every device holding the stage's layers (r₀ · r · ..., the data-parallel
// width its gradients are all-reduced over, level by level), and `devices` lists them all.
struct planned_stage {
  int first_layer = 0;  // inclusive
  int last_layer = 0;   // inclusive
  int replicas = 1;
  std::vector<int> devices;  // replicas devices, ascending, in the cluster's numbering
  // The stage's time per microbatch including its all-reduce share; on a hierarchy, its share of
  // the enclosing top-level stage's time (t ← t / r + that level's all-reduce, level by level).
  double time_ms = 0;
  std::int64_t memory_bytes = 0;  // per device: the most any of its devices needs (devices with
                                  // profiles of their own may need less: pipeline_plan::memory_bytes)
};

struct pipeline_plan {
  std::vector<planned_stage> stages;
  double bottleneck_ms = 0;       // the slowest stage or link, per microbatch
  double predicted_step_ms = 0;   // for the plan's microbatches per step (see the planner)
  // Entry d: device d's estimate (0 for a device the plan leaves idle), up to the highest device
  // used; the same meaning in every planner and in `pipeworks plan --json`.
  std::vector<std::int64_t> memory_bytes;
  // The profile's mode: what memory_bytes assumes, and what the run must do (runtime.recompute).
  recompute_mode recompute = recompute_mode::none;
  // With a profile of several modes: each mode's outcome and the choice (recompute_choice.hpp);
  // "" with a profile of one mode.
  std::string recompute_choice;
  // ZeRO's level the plan assumes (run_plan::zero): plan_pipedream chooses 1 when only it makes a
  // faster plan fit; memory_bytes then counts each replica's share of its stage's optimizer state
  // and time_ms the gather of the weights.
  int zero = 0;
};

struct pipedream_options {
  int max_devices = 0;       // 0: all of the cluster's
  int in_flight = 0;         // microbatches in flight per stage for the memory estimate; 0: p − s
  // Every stage gets the same number of replicas (for a runtime that replicates whole
  // pipelines, as `pipeworks train --replicas w` does).
  bool same_replicas = false;
  // Profiles measured on other kinds of device, by the name a cluster's device gives in its
  // `profile` (a GPU's profile for the GPUs of a mixed CPU + GPU cluster): a device that names one
  // takes its layer times and saved bytes from it; the others take `profile`'s. Each must be of
  // the same model (layers, microbatch, parameter, optimizer and activation bytes).
  std::map<std::string, model_profile> device_profiles;
  // The highest ZeRO level the planner may plan with (run_plan::zero). 0 (the default): every
  // replica holds its stage's whole optimizer state, as PipeDream counts it. 1: on a cluster that
  // limits memory the plan is also searched with each replicated stage's optimizer state shared
  // out over its replicas, and that plan is kept (pipeline_plan::zero = 1) when it is faster than
  // every plan that fits without it. `pipeworks plan` and `train --auto-partition` ask for 1.
  int max_zero = 0;
};

// On a flat cluster of n identical devices with bandwidth bw the objective is exactly:
//   stage time = Σ(fwd_ms + bwd_ms)/r + (r > 1 ? 2(r − 1)/r · Σparam_bytes/bw : 0)
//   link time  = 2 · activation_bytes(last layer of the stage) / bw
//   bottleneck = max over stages and links.
// On a hierarchy (levels innermost first) the same objective level by level: a stage of level l is
// replicated over whole units of level l − 1, each running the best sub-pipeline of its layers,
// with level l's bandwidth (the recurrence is in pipedream_hierarchy.cpp; the choices for
// max_devices and for memory with in_flight = p − s are in pipedream_planner.cpp).
// An error when no plan fits in memory, saying by how much the smallest one exceeds it.
// A profile of several modes (profile_modes) is planned in each, device profiles in the same
// mode, and the plan of the highest throughput (profile.microbatch / bottleneck_ms) that fits is
// returned with its mode; a tie goes to less recomputation (choose_recompute).
// With options.max_zero = 1, on a cluster that limits memory, the plan is also searched under
// ZeRO 1 (each replicated stage's optimizer state shared out over its replicas, at least its
// largest tensor each, and a gather of its weights added to its all-reduce) and returned with
// zero = 1 when that plan is faster than every plan that fits without it (pipedream_planner.cpp
// says how each program counts it).
result<pipeline_plan> plan_pipedream(const model_profile& profile, const cluster& c,
                                     const pipedream_options& options = {});

}  // namespace pipeworks
