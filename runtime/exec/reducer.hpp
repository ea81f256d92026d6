// gradient_reducer: the pure part of a replicated stage's reducer. It collects the w replicas'
// gradients of one step and, once all have arrived, returns the sum (added in replica order, so
// the result does not depend on arrival order), one read-only sum that every replica copies.
// Under ZeRO it also collects the replicas' new versions of a step, each updated in the tensors
// its replica owns (shard_owners), and answers with one version made of every owner's tensors.
// Under the p2p reduce (cyclic's chain) it is the chain in one process: it adds each gradient to
// the partial sum as soon as the replicas before it are in, keeping the partial sum and the
// gradients that came early, answers the last replica alone with the sum, and hands the last
// replica's new version to every other replica. Given a GPU, it sums GPU gradients there (the same
// order, so the same bits as on the host) and answers with a GPU sum handed over to the replicas.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "ops/device/device_context.hpp"
#include "ops/model/param_set.hpp"
#include "base/result.hpp"
#include "runtime/exec/messages.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

class gradient_reducer {
 public:
  // gpu: the GPU on which the collective sums gradients that come as GPU tensors, with a device
  // context of its own (stream, allocator) opened when the first one comes; none: every gradient
  // must come on the host.
  gradient_reducer(int stage, int replicas, reduce_mode mode = reduce_mode::collective,
                   std::optional<device> gpu = std::nullopt);

  // Adds one replica's gradient (or new version). When it completes something, returns the
  // answers to send: result[r] goes to replica r, unless its sum is null (p2p answers some).
  // An error for a duplicate, a replica out of range or a layout that differs from the others'.
  result<std::optional<std::vector<reduce_result>>> add(reduce_request request);

  int pending_steps() const { return static_cast<int>(pending_.size() + chains_.size()); }
  // The most bytes of gradients (and partial sums) it held at once.
  std::int64_t peak_bytes() const { return peak_bytes_; }

 private:
  result<std::optional<std::vector<reduce_result>>> add_to_chain(reduce_request request,
                                                                 const std::string& who);
  void hold(std::int64_t bytes);
  // The gradients' sum in replica order 0..w-1: on the host, or on gpu_ for GPU gradients (each
  // copied onto its stream after its ready event; the sum handed over for the replicas to copy).
  param_set sum_in_order(const std::vector<std::shared_ptr<const param_set>>& slots) const;

  // p2p: a step's partial sum of replicas 0 .. next-1 and the gradients of later ones come early.
  struct chain_state {
    std::shared_ptr<param_set> partial;
    int next = 0;
    std::map<int, std::shared_ptr<const param_set>> early;
  };
  int stage_;
  int replicas_;
  reduce_mode mode_;
  std::optional<device> gpu_at_;
  std::shared_ptr<device_context> gpu_;  // opened on gpu_at_ for the first GPU gradient
  std::map<int, chain_state> chains_;  // by step
  std::int64_t held_bytes_ = 0, peak_bytes_ = 0;
  std::map<int, std::vector<std::shared_ptr<const param_set>>> pending_;   // by step
  std::map<int, std::vector<std::shared_ptr<const param_set>>> versions_;  // by step (ZeRO)
};

}  // namespace pipeworks
