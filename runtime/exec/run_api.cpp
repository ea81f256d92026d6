// check(plan, hooks): a fault must name something of the plan's programs that it can affect.
#include "runtime/exec/run_api.hpp"

#include "runtime/exec/rank_setup.hpp"

namespace pipeworks {

status check(const run_plan& plan, const pipeline_hooks& hooks) {
  const fault_injection& f = hooks.fault;
  if (f.kind == fault_kind::none) return {};
  if (!plan.schedule) return make_error("fault injection needs a pipeline schedule");
  const int V = plan.virtual_stages();
  if (f.replica < 0 || f.replica >= plan.replicas)
    return make_error("the fault's replica " + std::to_string(f.replica) + " is not in 0.." +
                      std::to_string(plan.replicas - 1));
  if (f.at.stage < 0 || f.at.stage >= V)
    return make_error("the fault's stage " + std::to_string(f.at.stage) + " is not in 0.." +
                      std::to_string(V - 1));
  const action_kind k = f.at.kind;
  const bool computes = is_compute(k) || k == action_kind::step;
  const bool poisons = k == action_kind::forward ||
                       ((k == action_kind::backward || k == action_kind::input_grad) && f.at.stage > 0);
  if ((f.kind == fault_kind::exception && !computes) || (f.kind == fault_kind::nan && !poisons))
    return make_error("a fault of that kind at " + to_string(f.at) +
                      " would do nothing: exceptions are raised in F, B, I, W or STEP, and nan "
                      "poisons the output of an F or the input gradient of a B or I after stage 0");
  if (!plan.auto_partition) {  // the action must be in the replica's programs
    auto programs = plan_programs(plan);
    if (!programs) return make_error(programs.message());
    bool found = false;
    for (int d = 0; d < plan.stages && !found; ++d)
      for (const action& a : (*programs)->programs[static_cast<std::size_t>((*programs)->rank_of(f.replica, d))])
        found = found || a == f.at;
    if (!found)
      return make_error("the fault's action " + to_string(f.at) +
                        " is not in the programs of replica " + std::to_string(f.replica));
  }
  return {};
}

}  // namespace pipeworks
