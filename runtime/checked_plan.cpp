// check_plan: the one check of a run's plan, whose result says it was made.
#include "runtime/checked_plan.hpp"

#include "ops/model/model.hpp"

namespace pipeworks {

result<checked_plan> check_plan(run_plan plan, int blocks, const field_namer& name) {
  if (blocks < 0) blocks = build_model<float>(plan.model).size();
  if (auto i = first_issue(plan, blocks)) {
    const field_namer own = [](std::string_view f) { return std::string(f); };
    return make_error(render(*i, name ? name : own));
  }
  return checked_plan(std::move(plan), blocks);
}

}  // namespace pipeworks
