// The sequential reference of a pipelined run: one thread, no messages, the schedule's version
// table applied literally. Microbatch k of step t runs forward through every virtual stage s
// with version versions[s][t*m+k].forward and backward with .backward; each stage's gradients
// of step t (all replicas, scaled by 1/(m*w)) make version t+1 from version t. A replica's
// gradient of a microbatch counts toward the update that follows its backward in the replica's
// program: step t = id / m, except for cyclic with w > 1, where replica q's update t covers ids
// [t*m + floor(q m / w), (t+1)*m + floor(q m / w)). The semantics test compares a pipelined
// run's weights with these.
#pragma once
#include <vector>

#include "ops/model/model.hpp"
#include "base/result.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// The weights of every virtual stage after plan.params.steps steps. `initial` is the whole
// model; boundaries cut it into the virtual stages; cfg gives the optimizer and lr schedule
// (each stage has its own optimizer state; when cfg clips, flush schedules clip by the global
// norm of all stages' gradients, the others each stage by its own).
template <class T>
result<std::vector<param_set>> reference_train(const model<T>& m, const schedule& plan,
                                               const std::vector<int>& boundaries,
                                               const param_set& initial, const train_config& cfg,
                                               const minibatch_fn& data);

}  // namespace pipeworks
