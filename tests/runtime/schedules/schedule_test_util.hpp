// What the generator tests share: schedule parameters in one call, and the most activations a
// program holds at once.
#pragma once
#include <algorithm>

#include "runtime/schedule.hpp"

namespace pipeworks::test {

inline schedule_params params(int p, int m, int steps = 1, int w = 1, int chunks = 1) {
  schedule_params sp;
  sp.stages = p;
  sp.microbatches = m;
  sp.chunks = chunks;
  sp.steps = steps;
  sp.replicas = w;
  return sp;
}

// Microbatches whose F ran and whose W has not, at most, over a program (split backwards).
inline int peak_stashed(const program& prog) {
  int now = 0, peak = 0;
  for (const action& a : prog) {
    if (a.kind == action_kind::forward) peak = std::max(peak, ++now);
    if (a.kind == action_kind::weight_grad) --now;
  }
  return peak;
}

}  // namespace pipeworks::test
