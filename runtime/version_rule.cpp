// Version tables for the built-in rules; see version_rule.hpp and DESIGN.md §1.
#include "runtime/version_rule.hpp"

#include <algorithm>

namespace pipeworks {

version_table flush_versions(int virtual_stages, int microbatches, int steps) {
  const int total = microbatches * steps;
  version_table t(virtual_stages, std::vector<version_use>(total));
  for (auto& row : t)
    for (int mb = 0; mb < total; ++mb) row[mb] = {mb / microbatches, mb / microbatches};
  return t;
}

version_table latest_versions(const schedule& s) {
  const int total = s.total_microbatches();
  version_table t(s.virtual_stages, std::vector<version_use>(total));
  std::vector<int> steps_done(s.virtual_stages, 0);
  const int first_replica_ranks = std::min<int>(s.params.stages, s.ranks());
  // version(F(s, mb)) = number of STEP(s) before it in program order; its backward reuses it.
  for (int r = 0; r < first_replica_ranks; ++r) {
    for (const action& a : s.programs[r]) {
      if (a.stage < 0 || a.stage >= s.virtual_stages) continue;
      if (a.kind == action_kind::step) {
        ++steps_done[a.stage];
      } else if (a.kind == action_kind::forward && a.microbatch >= 0 && a.microbatch < total) {
        const int v = steps_done[a.stage];
        t[a.stage][a.microbatch] = {v, v};
      }
    }
  }
  return t;
}

version_table vertical_sync_versions(const version_table& latest) {
  version_table t = latest;
  if (t.empty()) return t;
  for (auto& row : t) row = latest.front();
  return t;
}

version_table delayed_versions(int virtual_stages, int microbatches, int steps) {
  const int total = microbatches * steps;
  version_table t(virtual_stages, std::vector<version_use>(total));
  for (auto& row : t)
    for (int mb = 0; mb < total; ++mb) {
      const int v = std::max(mb / microbatches - 1, 0);
      row[mb] = {v, v};
    }
  return t;
}

}  // namespace pipeworks
