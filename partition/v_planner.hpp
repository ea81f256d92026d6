// The split for the V schedules (zbv, v-half, v-min, dualpipev): 2p contiguous pieces of the
// model over p devices, device d running pieces d and 2p-1-d, chosen exactly by a dynamic program
// over both ends of the model at once. dualpipe over P devices is the same V over P/2 positions:
// devices d and P-1-d both hold pieces d and P-1-d of its P.
#pragma once
#include <cstdint>
#include <vector>

#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/profile.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

struct v_plan_request {
  schedule_kind schedule = schedule_kind::zbv;  // a V kind (is_v_shape), or dualpipe
  int devices = 2;                              // p (dualpipe: its even device count)
  int microbatches = 1;                         // m per step (the schedule's stash depends on it)
  // The cluster's device at each position d = 0..p-1 (distinct); empty: devices 0..p-1.
  std::vector<int> placement;
};

struct v_plan {
  // 2p + 1 layer indices: virtual stage s runs layers [boundaries[s], boundaries[s + 1]) (dualpipe:
  // P + 1, its stages of the model, each run by two devices).
  std::vector<int> boundaries;
  // Per device: its two pieces' forward and backward per microbatch, divided by its speed.
  std::vector<double> device_ms;
  double bottleneck_ms = 0;  // the largest of device_ms: what the split minimises
  // Per device: 2·param + optimizer of both pieces, and each piece's stash (the schedule's most
  // microbatches in flight on that virtual stage, from its programs) of saved bytes.
  std::vector<std::int64_t> device_bytes;
  std::vector<int> in_flight;  // per virtual stage: that most, which the memory counts
  std::vector<int> placement;  // the cluster's device at each position d
};

// The split of `profile`'s layers that minimises the slowest device's compute per microbatch
// among those whose every device fits its memory (cluster.memory(d); 0: unlimited), each piece at
// least one layer. Exact: the recurrence is in v_planner.cpp. An error names what does not fit
// (the smallest device_bytes any split reaches) or what is asked wrongly (not a V kind, fewer
// than 2p layers, more devices than the cluster has, the schedule's own refusal of m).
result<v_plan> plan_v(const model_profile& profile, const cluster& devices,
                      const v_plan_request& request);

// plan_v for each device count p from 1 to max_devices (0: the cluster's; at most half the
// layers) and each placement of p of the cluster's devices on the V's positions (devices alike in
// speed and memory are one choice; up to max_v_placements placements per p, and about 2e9 steps
// of the dynamic program in all, else the cluster's order alone), each plan's step simulated on the profile's costs (W half of B, free links, each
// device at its speed), and the fastest step kept (a tie: the smaller bottleneck, then fewer
// devices). An error when none can be planned: the reason for the last plan tried.
constexpr int max_v_placements = 5040;
struct v_choice {
  v_plan plan;
  int devices = 1;
  double step_ms = 0;  // one step of m microbatches, simulated (the second of two)
};
result<v_choice> plan_v_devices(const model_profile& profile, const cluster& devices,
                                schedule_kind kind, int microbatches, int max_devices = 0);

// The most microbatches in flight on each virtual stage of `s` (its F's minus the B's or W's
// that free them, walked in each rank's program order), over every rank of replica 0.
std::vector<int> peak_in_flight(const schedule& s);

}  // namespace pipeworks
