// checkpoint_cut and check_cut: positions after each rank's own STEP N, and the static check that
// no message crosses the cut backwards (received before the cut, sent after it).
#include "runtime/checkpoint/cut.hpp"

#include <map>
#include <string>
#include <tuple>

namespace pipeworks {

result<std::vector<std::size_t>> checkpoint_cut(const schedule& s, int steps_done) {
  if (steps_done < 1 || steps_done > s.params.steps)
    return make_error("a checkpoint after step " + std::to_string(steps_done) +
                      " is outside the run's steps 1.." + std::to_string(s.params.steps));
  std::vector<std::size_t> cut(s.programs.size(), 0);
  for (std::size_t r = 0; r < s.programs.size(); ++r) {
    std::map<int, int> seen;  // virtual stage -> STEPs so far
    bool found = false;
    const program& prog = s.programs[r];
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (prog[i].kind != action_kind::step) continue;
      if (seen[prog[i].stage]++ == steps_done - 1) {
        cut[r] = i + 1;
        found = true;
      }
    }
    if (!found)
      return make_error("rank " + std::to_string(r) + " has no STEP " +
                        std::to_string(steps_done) + " in its program");
  }
  return cut;
}

status check_cut(const schedule& s, const std::vector<std::size_t>& cut) {
  if (cut.size() != s.programs.size())
    return make_error("the cut names " + std::to_string(cut.size()) + " ranks, the schedule has " +
                      std::to_string(s.programs.size()));
  const int p = s.params.stages;
  // (replica, consumer stage, forward, microbatch) -> whether its SEND is before the cut.
  std::map<std::tuple<int, int, bool, int>, bool> sent_before;
  std::map<std::tuple<int, int>, std::vector<bool>> reduce_before;  // (stage, occurrence)
  for (std::size_t r = 0; r < s.programs.size(); ++r) {
    const int q = static_cast<int>(r) / p;
    std::map<int, int> reduces;
    const program& prog = s.programs[r];
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const action& a = prog[i];
      if (a.kind == action_kind::send_f)
        sent_before[{q, a.stage + 1, true, a.microbatch}] = i < cut[r];
      else if (a.kind == action_kind::send_b)
        sent_before[{q, a.stage - 1, false, a.microbatch}] = i < cut[r];
      else if (a.kind == action_kind::reduce)
        reduce_before[{a.stage, reduces[a.stage]++}].push_back(i < cut[r]);
    }
  }
  for (std::size_t r = 0; r < s.programs.size(); ++r) {
    const int q = static_cast<int>(r) / p;
    const program& prog = s.programs[r];
    for (std::size_t i = 0; i < cut[r] && i < prog.size(); ++i) {
      const action& a = prog[i];
      if (a.kind != action_kind::recv_f && a.kind != action_kind::recv_b) continue;
      auto it = sent_before.find({q, a.stage, a.kind == action_kind::recv_f, a.microbatch});
      if (it == sent_before.end() || !it->second)
        return make_error("rank " + std::to_string(r) + " receives " + to_string(a) +
                          " before its cut, but its sender sends it after its own cut");
    }
  }
  for (const auto& [key, flags] : reduce_before) {
    bool any = false, all = true;
    for (bool f : flags) {
      any = any || f;
      all = all && f;
    }
    if (any && !all)
      return make_error("REDUCE " + std::to_string(std::get<1>(key) + 1) + " of stage " +
                        std::to_string(std::get<0>(key)) +
                        " is before the cut on some replicas and after it on others");
  }
  return {};
}

}  // namespace pipeworks
