// gradient_reducer: the pure part of a replicated stage's reducer. It collects the w replicas'
// gradients of one step and, once all have arrived, returns the sum (added in replica order, so
// the result does not depend on arrival order), one read-only sum that every replica copies.
// Under ZeRO it also collects the replicas' new versions of a step, each updated in the tensors
// its replica owns (shard_owners), and answers with one version made of every owner's tensors.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "ops/model/param_set.hpp"
#include "base/result.hpp"
#include "runtime/exec/messages.hpp"

namespace pipeworks {

class gradient_reducer {
 public:
  gradient_reducer(int stage, int replicas);

  // Adds one replica's gradient (or new version). When it is the last one of its step, returns
  // the answers to send: result[r] goes to replica r. An error for a duplicate, a replica out of
  // range or a layout that differs from the others'.
  result<std::optional<std::vector<reduce_result>>> add(reduce_request request);

  int pending_steps() const { return static_cast<int>(pending_.size()); }

 private:
  int stage_;
  int replicas_;
  std::map<int, std::vector<std::shared_ptr<const param_set>>> pending_;   // by step
  std::map<int, std::vector<std::shared_ptr<const param_set>>> versions_;  // by step (ZeRO)
};

}  // namespace pipeworks
