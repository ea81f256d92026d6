// gather_steps: each rank's STEPs of one step moved together to the last one's place.
#include <map>

#include "runtime/lower.hpp"

namespace pipeworks {

schedule gather_steps(schedule&& out) {
  for (program& prog : out.programs) {
    std::map<int, int> count;                  // stage -> STEPs so far
    std::vector<int> step_of(prog.size(), -1);  // position -> step index of its STEP
    std::map<int, std::size_t> last;            // step -> position of its last STEP
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (prog[i].kind == action_kind::step) {
        step_of[i] = count[prog[i].stage]++;
        last[step_of[i]] = i;
      }
    std::map<int, std::vector<action>> pending;  // step -> its STEPs waiting for the last place
    program gathered;
    gathered.reserve(prog.size());
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (step_of[i] < 0) {
        gathered.push_back(prog[i]);
        continue;
      }
      auto& group = pending[step_of[i]];
      group.push_back(prog[i]);
      if (last[step_of[i]] == i) {
        gathered.insert(gathered.end(), group.begin(), group.end());
        pending.erase(step_of[i]);
      }
    }
    prog = std::move(gathered);
  }
  return std::move(out);
}

}  // namespace pipeworks
