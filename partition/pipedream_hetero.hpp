// PipeDream's planner on a list of heterogeneous devices (each its own speed and memory):
// contiguous stages, each replicated over devices of the list, minimising the bottleneck.
#pragma once
#include <limits>

#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/pipedream_planner.hpp"
#include "partition/profile.hpp"

namespace pipeworks {

// For a cluster given as `devices` (one flat level; links at levels[0]'s bandwidth, or free when
// no level is given). The objective, exactly, over every plan (any contiguous split, any disjoint
// sets of devices for the stages, at most options.max_devices in all):
//   stage time = max over its r devices d of Σ(fwd_ms + bwd_ms by d's profile) / (r · speed_d)
//                + (r > 1 ? 2(r − 1)/r · Σparam_bytes / bw : 0)
//                (microbatches go round-robin to the replicas: the slowest sets the pace; d's
//                profile is options.device_profiles[d.profile], or `profile` when d names none)
//   link time  = 2 · activation_bytes(last layer of the stage) / bw
//   bottleneck = max over stages and links, minimised
// subject to: every device of a stage holds Σ(2·param + optimizer) + in_flight · Σsaved bytes (by
// its profile)
// within its own memory_bytes (0: unlimited), in_flight = options.in_flight or p − s (0);
// with options.same_replicas every stage has the same number of replicas.
// stages[s].devices are the cluster's device numbers, ascending; memory_bytes is indexed by the
// cluster's device number (entry d: device d's estimate, 0 for a device the plan does not use,
// ending at the highest-numbered device used), as two_bw_plan's; predicted_step_ms =
// (3p − 1) · bottleneck as plan_pipedream's. Among plans at the optimal bottleneck: the fewest
// devices, then the fewest stages (with same_replicas, over every replica count).
// The profile's byte totals must pass check_profile_totals (at most 2^50 bytes per field).
//
// Cost: identical devices (speed, memory, profile) form a class; with n_c devices in class c the search visits
//   (rows) · L(L+1)/2 · Π_c (n_c + 1)(n_c + 2)/2   (· n with same_replicas)
// stage choices per bisection step (rows = min(L, n) when memory binds and in_flight is p − s,
// else 1), about 20 steps. An error, saying what to do, when that passes 10^8; an error when no
// plan fits in memory, naming the device, saying by how much the best one exceeds its memory and
// what to try. Called by plan_pipedream (which checks the profile and the options first); callers
// use plan_pipedream.
// zero = 1: each replicated stage's devices hold their share of its optimizer state under ZeRO 1
// and its time includes the gather (zero_share.hpp), as plan_pipedream counts them; then an error
// at once when no plan reaches a bottleneck ≤ below (the plan to beat).
result<pipeline_plan> plan_pipedream_devices(
    const model_profile& profile, const cluster& c, const pipedream_options& options = {},
    int zero = 0, double below = std::numeric_limits<double>::infinity());

}  // namespace pipeworks
