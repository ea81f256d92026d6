// min_credit_window: the smallest per-link credit window with which a lowered schedule still
// runs to the end. With blocking receives and blocking sends the ranks form a monotone system
// (what one rank may do only grows as others progress), so whether it deadlocks does not depend
// on timing, and one abstract run per window size decides it.
#include <algorithm>
#include <map>
#include <tuple>

#include "runtime/program_walk.hpp"

namespace pipeworks {

int min_credit_window(const schedule& lowered) {
  // The most messages one link carries: with that window no SEND ever waits.
  std::map<std::tuple<int, int, bool>, int> per_link;
  int most = 1;
  for (int r = 0; r < lowered.ranks(); ++r)
    for (const action& a : lowered.programs[r]) {
      const action_flow f = describe_action(lowered, true, r / lowered.params.stages, a);
      if (f.waits != wait_kind::credit) continue;
      const link_id& l = f.awaited.link;
      most = std::max(most, ++per_link[{l.replica, l.stage, l.forward}]);
    }
  // Runs every program with free compute and `window` credits per link.
  for (int window = 1; window < most; ++window)
    if (program_walker(lowered, {.lowered = true, .credit_window = window}).run()) return window;
  return most;
}

}  // namespace pipeworks
