// A small plan the plan tests share: the mlp over 2 stages, 2 microbatches of a batch of 8, for
// 4 steps.
#pragma once
#include "ops/model/model.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks::test {

inline run_plan mlp_plan() {
  run_plan p;
  p.model = *parse_model_spec("mlp");
  p.stages = 2;
  p.train.microbatches = 2;
  p.train.steps = 4;
  p.data.batch = 8;
  return p;
}

}  // namespace pipeworks::test
