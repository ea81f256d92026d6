// Baselines to set against PipeDream-2BW's plans on the same profile and cluster: the best GPipe
// configuration, pure data parallelism, and model parallelism without pipelining (GPipe, m = 1).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/pipedream_planner.hpp"  // planned_stage
#include "partition/profile.hpp"
#include "partition/two_bw_planner.hpp"

namespace pipeworks {

// The fields of two_bw_plan (see two_bw_planner.hpp), placed as the 2BW planner places them:
// on a hierarchy replica r runs stage s on device r·p + s; on a device list the devices are dealt
// by speed (or memory) in groups of w. time_ms is per microbatch at b on the slowest replica.
struct baseline_plan : two_bw_plan {
  std::string kind;  // "gpipe", "data-parallel" or "model-parallel"
};

struct baseline_options {
  int max_devices = 0;  // 0: all of the cluster's
  bool use_simulator = true;
  int simulate_top = 8;  // how many of the best analytic GPipe candidates the simulator re-scores
  std::int64_t max_simulated_actions = std::int64_t{1} << 21;
  // As two_bw_options::device_profiles: devices that name a profile of their own are timed and
  // sized by it.
  std::map<std::string, model_profile> device_profiles;
};

// The cost model is two_bw_planner's, shared through candidate_cost.hpp (see two_bw_planner.hpp):
// figures scale linearly in b / profile.microbatch except parameter and optimizer bytes; the same
// placement of devices (r·p + s on a hierarchy; dealt by speed or by memory on a device list, the
// better of the two); the same split (balanced on time, or when that does not fit, the best
// balanced split that fits every stage's memory under this baseline's own stash); the same link
// and ring all-reduce model; the same candidate microbatch sizes (profile.microbatch × {1/4, 1/2,
// 1, 2, 4} where integral); the same ties (fewer inter-server links, devices, then stages). What
// differs is the schedule, the weight versions (1, not 2) and the stash:
//
// GPipe (Huang et al. 2019): all m forwards, then all m backwards, then a flush, every step.
//   Memory at stage s: Σparam (ONE weight version) + Σparam (gradients) + Σoptimizer
//                      + m·Σsaved(b)   (every microbatch of the step is stashed at once)
//   With a profile built with activation recomputation (GPipe's own default, as in torchgpipe),
//   Σsaved is each layer's input only, and the backward carries the recomputation.
//   Analytic step: (m + p − 1) · max(max_s stage_s, max_s link_s) + max_s allreduce_s
//   Simulated step: the makespan of the gpipe schedule {p, m, 1, w, steps = 1} on a cost model
//   built from the same figures (the flush makes every step pay fill and drain).
//   Candidates: 1 <= p <= min(layers, devices), p·w <= devices, m in {p, 2p, 4p}; the best
//   simulate_top by analytic throughput are simulated.
// Model parallelism without pipelining: GPipe with m = 1 (one microbatch in flight: only one
//   stage works at a time), p >= 2.
// Pure data parallelism: p = 1 (the whole model on every device), 1 <= w <= devices, m in
//   {1, 2, 4, 8} microbatches accumulated per step:
//   Memory: 2·Σparam + Σoptimizer + Σsaved(b)
//   Step: m · Σ(fwd + bwd)(b) / speed + 2(w−1)/w · Σparam / bandwidth + 2(w−1)·latency (the ring's
//   slowest hop; not overlapped with the backward, as two_bw_planner does not overlap it either).
//
// A profile of several modes (profile_modes) is planned in each, and the plan of the highest
// throughput that fits wins with its mode (a tie: less recomputation; choose_recompute);
// evaluate_gpipe plans in the profile's own mode.
//
// Errors when nothing fits name the device and say by how many bytes the smallest candidate
// exceeds its memory, and what to try.
result<baseline_plan> plan_gpipe(const model_profile& profile, const cluster& c,
                                 const baseline_options& options = {});
result<baseline_plan> plan_model_parallel(const model_profile& profile, const cluster& c,
                                          const baseline_options& options = {});
result<baseline_plan> plan_data_parallel(const model_profile& profile, const cluster& c,
                                         const baseline_options& options = {});

// One GPipe configuration (p, w, b, m), scored as plan_gpipe scores it; an error if it does not
// fit (with the excess) or is invalid (p > layers, p·w > devices, b < 1, m < 1).
result<baseline_plan> evaluate_gpipe(const model_profile& profile, const cluster& c, int p, int w,
                                     std::int64_t b, int m, const baseline_options& options = {});

}  // namespace pipeworks
