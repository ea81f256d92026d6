// min_credit_window: the smallest per-link credit window with which a lowered schedule still
// runs to the end. With blocking receives and blocking sends the ranks form a monotone system
// (what one rank may do only grows as others progress), so whether it deadlocks does not depend
// on timing, and one abstract run per window size decides it.
#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "runtime/exec/executor.hpp"

namespace pipeworks {
namespace {

using link_key = std::tuple<int, int, bool>;          // (replica, consumer stage, forward)
using msg_key = std::tuple<int, int, bool, int>;      // ... plus microbatch
using reduce_key = std::tuple<int, int>;              // (stage, occurrence)

// Runs every program with free compute; true when all finish with `window` credits per link.
bool finishes(const schedule& s, int window) {
  const int p = s.params.stages;
  const int w = s.params.replicas;
  const int ranks = s.ranks();
  std::vector<std::size_t> pc(ranks, 0);
  std::map<link_key, int> outstanding;
  std::map<msg_key, bool> sent;
  std::map<msg_key, int> waiting_msg;
  std::map<link_key, std::vector<int>> waiting_link;
  std::map<reduce_key, std::vector<int>> arrived;  // ranks at a REDUCE occurrence
  std::vector<std::map<int, int>> reduce_count(ranks);  // per rank: REDUCEs passed, by stage
  std::deque<int> ready;
  for (int r = 0; r < ranks; ++r) ready.push_back(r);
  std::vector<bool> queued(ranks, true);
  auto wake = [&](int r) {
    if (!queued[r]) {
      queued[r] = true;
      ready.push_back(r);
    }
  };
  while (!ready.empty()) {
    const int r = ready.front();
    ready.pop_front();
    queued[r] = false;
    const int replica = r / p;
    const program& prog = s.programs[r];
    while (pc[r] < prog.size()) {
      const action& a = prog[pc[r]];
      if (a.kind == action_kind::send_f || a.kind == action_kind::send_b) {
        const bool fwd = a.kind == action_kind::send_f;
        const link_key link{replica, fwd ? a.stage + 1 : a.stage - 1, fwd};
        if (outstanding[link] >= window) {
          waiting_link[link].push_back(r);
          break;
        }
        ++outstanding[link];
        const msg_key key{replica, std::get<1>(link), fwd, a.microbatch};
        sent[key] = true;
        if (auto it = waiting_msg.find(key); it != waiting_msg.end()) {
          wake(it->second);
          waiting_msg.erase(it);
        }
      } else if (a.kind == action_kind::recv_f || a.kind == action_kind::recv_b) {
        const bool fwd = a.kind == action_kind::recv_f;
        const msg_key key{replica, a.stage, fwd, a.microbatch};
        if (!sent.count(key)) {
          waiting_msg[key] = r;
          break;
        }
        const link_key link{replica, a.stage, fwd};
        --outstanding[link];
        if (auto it = waiting_link.find(link); it != waiting_link.end()) {
          for (int q : it->second) wake(q);
          waiting_link.erase(it);
        }
      } else if (a.kind == action_kind::reduce && w > 1) {
        const reduce_key key{a.stage, reduce_count[r][a.stage]};
        auto& at = arrived[key];
        if (std::find(at.begin(), at.end(), r) == at.end()) at.push_back(r);
        if (static_cast<int>(at.size()) < w) break;
        for (int q : at) wake(q);  // the others pass on their next turn
        ++reduce_count[r][a.stage];
      }
      ++pc[r];
    }
  }
  for (int r = 0; r < ranks; ++r)
    if (pc[r] < s.programs[r].size()) return false;
  return true;
}

}  // namespace

int min_credit_window(const schedule& lowered) {
  std::map<link_key, int> per_link;
  int most = 1;
  for (int r = 0; r < lowered.ranks(); ++r)
    for (const action& a : lowered.programs[r])
      if (a.kind == action_kind::send_f || a.kind == action_kind::send_b) {
        const bool fwd = a.kind == action_kind::send_f;
        most = std::max(most, ++per_link[{r / lowered.params.stages,
                                          fwd ? a.stage + 1 : a.stage - 1, fwd}]);
      }
  for (int window = 1; window < most; ++window)
    if (finishes(lowered, window)) return window;
  return most;
}

}  // namespace pipeworks
