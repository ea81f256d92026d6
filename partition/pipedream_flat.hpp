// PipeDream's planner on one pool of identical devices: the cost model (prefix sums over the
// layers) shared with the level-by-level planner, the exact flat program and same_replicas.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "partition/pipedream_planner.hpp"

namespace pipeworks::pipedream {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr int no_devices = std::numeric_limits<int>::max() / 4;

struct flat_model {
  int layers = 0;
  int devices = 0;
  std::int64_t memory = 0;          // per device; 0: unlimited
  int in_flight = 0;                // 0: p − s
  std::vector<double> compute;      // prefix sums of (fwd + bwd) / speed, ms
  std::vector<double> params;       // prefix sums of param_bytes
  std::vector<std::int64_t> fixed;  // prefix sums of 2 · param + optimizer bytes
  std::vector<std::int64_t> saved;  // prefix sums of saved_bytes
  std::vector<double> activation;   // activation_bytes of each layer
  std::vector<double> link_ms;      // 2 · activation_bytes[j] / the pool's link bandwidth, ms
  std::vector<int> unit_size;       // devices in one unit of each level, innermost first
  std::vector<double> ms_per_byte;  // 1000 / bandwidth of each level (0: free)

  double compute_ms(int i, int j) const { return compute[j + 1] - compute[i]; }
  double param_bytes(int i, int j) const { return params[j + 1] - params[i]; }
  std::int64_t memory_of(int i, int j, int f) const {
    return fixed[j + 1] - fixed[i] + static_cast<std::int64_t>(f) * (saved[j + 1] - saved[i]);
  }
  bool fits(int i, int j, int f) const { return memory == 0 || memory_of(i, j, f) <= memory; }
  // The level an all-reduce over r replicas of the pool runs at: the innermost whose unit holds
  // r devices (replicas packed into as few units as possible).
  int level_of(int r) const;
  // T(i..j, r) = Σ(fwd + bwd)/r + (r > 1 ? 2(r − 1)/r · Σparam_bytes / bw : 0)
  double stage_ms(int i, int j, int r) const;
  // The fewest replicas r ≤ cap with T(i..j, r) ≤ b, or no_devices.
  int min_replicas(int i, int j, double b, int cap) const;
};

// The fewest r ≤ cap with a + (t − a)/r ≤ x where a = 2 · param_bytes · ms_per_byte (the stage
// time t / r plus its all-reduce 2(r − 1)/r · param / bw), or no_devices. The formula decides.
int fewest_replicas(double t, double param_bytes, double ms_per_byte, double x, int cap);
double replicated_ms(double t, double param_bytes, double ms_per_byte, int r);

// The exact flat program (links at link_ms, all-reduce at level_of(r), memory with
// in_flight = p − s when 0). Stages with devices numbered 0, 1, .. and time_ms; nothing when no
// split into at most `devices` stages fits in memory.
std::optional<std::vector<planned_stage>> plan_flat(const flat_model& m);
// Every stage with the same replica count: the least bottleneck over r with p · r ≤ devices.
std::optional<std::vector<planned_stage>> plan_same_replicas(const flat_model& m);
// The least peak memory per device of any split into at most `devices` stages (for the error).
std::int64_t least_peak_memory(const flat_model& m);
// max over stages of time_ms and over consecutive stages of link_ms[last layer].
double flat_bottleneck(const flat_model& m, const std::vector<planned_stage>& stages);

}  // namespace pipeworks::pipedream
