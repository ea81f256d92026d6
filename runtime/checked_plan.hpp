// checked_plan: a run plan that passed its one check (first_issue) for a model's block count.
// Only check_plan makes one, so whoever is handed a checked_plan does not check it again.
#pragma once
#include <utility>

#include "base/result.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {

class checked_plan;

// The plan, checked (first_issue) for a model of `blocks` blocks (-1: the plan's model's). The
// error is its first problem, rendered with `name` (null: the plan's own field names, as check()).
result<checked_plan> check_plan(run_plan plan, int blocks = -1, const field_namer& name = nullptr);

class checked_plan {
 public:
  const run_plan& get() const { return plan_; }
  const run_plan* operator->() const { return &plan_; }
  int blocks() const { return blocks_; }  // the model's block count it was checked for

 private:
  friend result<checked_plan> check_plan(run_plan plan, int blocks, const field_namer& name);
  checked_plan(run_plan plan, int blocks) : plan_(std::move(plan)), blocks_(blocks) {}
  run_plan plan_;
  int blocks_ = 0;
};

}  // namespace pipeworks
