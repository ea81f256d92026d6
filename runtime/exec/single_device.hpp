// The single-device run (`--schedule none`): gradient accumulation over m microbatches on one
// device, the reference every flush schedule equals, with the plan's checkpoints (one rank file:
// the weights and the optimizer state), weight publishing and stop_requested polled before each
// step. No actors.
#pragma once
#include <optional>

#include "ops/model/model.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"
#include "runtime/exec/run_api.hpp"

namespace pipeworks {

template <class T>
result<pipeline_result> train_single(const model<T>& net, const param_set& initial,
                                     const run_plan& plan, const data_factory& make_data,
                                     const pipeline_callbacks& cb,
                                     const std::optional<resume_point>& resume);

}  // namespace pipeworks
