// The library's entry point: train a model as a run_plan says (any schedule, on CAF actors: stage
// actors and their replicas, gradient reducers, a driver, a tracer, a partition actor), from a
// data callback, reporting metrics, weight snapshots and checkpoints through callbacks. No CLI
// needed. The plan is the whole run: runtime/run_plan.hpp.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "ops/model/model.hpp"
#include "runtime/checked_plan.hpp"
#include "runtime/exec/run_api.hpp"

namespace pipeworks {

// Trains `m` as `plan` says, from `initial` (the whole model's parameters; unused when the plan
// resumes: plan.data.position > 0 continues from checkpoint.dir's checkpoint of that step).
// data and the callbacks run on the driver's thread, one call at a time, in step order.
// Failures (an exception in a stage, a non-finite loss, an actor that dies, a bad checkpoint)
// end the run within a second with an error naming the stage, the replica, the action and the
// cause. Errors about the plan name its fields (check_plan).
template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const run_plan& plan, const data_factory& data,
                                       const pipeline_callbacks& callbacks = {},
                                       const pipeline_hooks& hooks = {});

// The same with a plan the caller has checked (check_plan, for `m`'s blocks): it is not checked
// again. The plan is resolved and lowered once; the driver, each worker and the result are handed
// the lowered run.
template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const checked_plan& plan, const data_factory& data,
                                       const pipeline_callbacks& callbacks = {},
                                       const pipeline_hooks& hooks = {});

// The same with a fixed data function, for plans whose batch is known up front.
template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const run_plan& plan, const minibatch_fn& data,
                                       const pipeline_callbacks& callbacks = {},
                                       const pipeline_hooks& hooks = {});

}  // namespace pipeworks
