// Shared by the planner tests: one layer of a hand-built profile from its times and bytes.
#pragma once
#include <cstdint>

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

}  // namespace pipeworks::partition_test
