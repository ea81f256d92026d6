// The bottleneck search shared by PipeDream's planners: the least b for which a monotone
// "is there a plan with every stage and link at most b?" holds, exactly (bisection on bits).
#pragma once
#include <bit>
#include <cstdint>
#include <string>

#include "partition/plan_progress.hpp"

namespace pipeworks::pipedream {

// The least b with feasible(b), given that every b < lower is infeasible and feasible(hi) holds.
// Non-negative doubles order like their bit patterns, so bisection on the patterns ends on the
// least feasible double: the value of an actual plan's slowest stage or link, not an epsilon near
// it. Galloping up from `lower` first keeps every probe near the answer (the programs' inner
// loops are short there). feasible(b) is last called with the answer.
// Each probe is reported (plan_progress.hpp): about 64 in all.
template <class Feasible>
double least_feasible(double lower, double hi, Feasible&& probe) {
  const std::string what = "bottleneck search " + std::to_string(next_plan_search()) + ", probe";
  long long probes = 0;
  auto feasible = [&](double b) {
    report_plan_progress(what, ++probes, 64);
    return probe(b);
  };
  if (feasible(lower)) return lower;
  std::int64_t lo_bits = std::bit_cast<std::int64_t>(lower);  // infeasible
  std::int64_t hi_bits = std::bit_cast<std::int64_t>(hi);     // feasible
  for (double x = lower > 0 ? 2 * lower : 1e-9; x < hi; x *= 2) {
    if (feasible(x)) {
      hi_bits = std::bit_cast<std::int64_t>(x);
      break;
    }
    lo_bits = std::bit_cast<std::int64_t>(x);
  }
  while (hi_bits - lo_bits > 1) {
    const std::int64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
    if (feasible(std::bit_cast<double>(mid))) hi_bits = mid;
    else lo_bits = mid;
  }
  const double b = std::bit_cast<double>(hi_bits);
  feasible(b);  // leave the program's tables at the answer
  return b;
}

}  // namespace pipeworks::pipedream
