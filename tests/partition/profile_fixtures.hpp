// Shared by the planner tests: one layer of a hand-built profile from its times and bytes, and
// the contiguous splits a brute force enumerates.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "partition/profile.hpp"

namespace pipeworks::partition_test {

inline layer_profile layer(double fwd, double bwd, std::int64_t act, std::int64_t saved,
                           std::int64_t params, std::int64_t opt = 0) {
  layer_profile l;
  l.name = "l";
  l.fwd_ms = fwd;
  l.bwd_ms = bwd;
  l.activation_bytes = act;
  l.saved_bytes = saved;
  l.param_bytes = params;
  l.optimizer_bytes = opt;
  return l;
}

// The contiguous split of L layers whose cut g (after layer g) is bit g of mask: the stages'
// first and last layers.
inline std::vector<std::pair<int, int>> split_of(int L, int mask) {
  std::vector<std::pair<int, int>> st;
  int first = 0;
  for (int g = 0; g < L - 1; ++g)
    if (mask >> g & 1) {
      st.push_back({first, g});
      first = g + 1;
    }
  st.push_back({first, L - 1});
  return st;
}

}  // namespace pipeworks::partition_test
