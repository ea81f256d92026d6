// gradient_reducer: collects a step's gradients from every replica and sums them in replica
// order once the last one arrives.
#include "runtime/exec/reducer.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "ops/device/device_ops.hpp"
#include "ops/train/zero_shards.hpp"

namespace pipeworks {

gradient_reducer::gradient_reducer(int stage, int replicas, reduce_mode mode,
                                   std::optional<device> gpu)
    : stage_(stage), replicas_(replicas), mode_(mode), gpu_at_(gpu) {}

param_set gradient_reducer::sum_in_order(
    const std::vector<std::shared_ptr<const param_set>>& slots) const {
  if (slots[0]->where().kind == device_kind::cpu) {
    param_set sum = slots[0]->clone();
    for (std::size_t r = 1; r < slots.size(); ++r) {
      if (sum.type() == dtype::f32)
        add_values<float>(sum, *slots[r]);
      else
        add_values<double>(sum, *slots[r]);
    }
    return sum;
  }
  // Each gradient copied here after its ready event (the replica's stream goes on); the copies
  // keep the gradients until they are done.
  param_set sum = slots[0]->copied_to(*gpu_, slots[0]);
  for (std::size_t r = 1; r < slots.size(); ++r) {
    const param_set x = slots[r]->copied_to(*gpu_, slots[r]);
    add_into<float>(*gpu_, sum.arena().data<float>(), x.arena().data<float>(), sum.size());
  }
  gpu_->hand_over(sum.arena());
  // Waited for here, so that the replicas' gradients go back to their GPUs' allocators now and
  // not a step later (each replica has made its next gradient buffer by then).
  gpu_->wait();
  return sum;
}

void gradient_reducer::hold(std::int64_t bytes) {
  held_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, held_bytes_);
}

// The chain 0 -> 1 -> ... -> w-1 in one process: the partial sum grows in replica order, so its
// bits are those of the collective's sum; the last replica alone gets it.
result<std::optional<std::vector<reduce_result>>> gradient_reducer::add_to_chain(
    reduce_request request, const std::string& who) {
  const int step = request.step;
  if (request.kind == reduce_kind::weights) {
    if (request.replica != replicas_ - 1)
      return make_error(who + ": under the p2p reduce only the last replica (" +
                        std::to_string(replicas_ - 1) + ") makes new versions");
    std::vector<reduce_result> out(static_cast<std::size_t>(replicas_));
    for (int r = 0; r + 1 < replicas_; ++r)
      out[static_cast<std::size_t>(r)] =
          reduce_result{stage_, step, request.grads, reduce_kind::weights, {}};
    return std::optional<std::vector<reduce_result>>(std::move(out));
  }
  chain_state& c = chains_[step];
  if (request.replica < c.next || c.early.count(request.replica))
    return make_error(who + " arrived twice");
  if (c.partial && !c.partial->same_layout(*request.grads))
    return make_error(who + " has a different layout (names, shapes, blocks or dtype) from the " +
                      "other replicas'; every replica of a stage must hold the same blocks");
  const auto bytes = static_cast<std::int64_t>(request.grads->nbytes());
  hold(bytes);
  c.early.emplace(request.replica, std::move(request.grads));
  for (auto it = c.early.find(c.next); it != c.early.end(); it = c.early.find(c.next)) {
    const auto& g = it->second;
    if (!c.partial) {
      c.partial = std::make_shared<param_set>(g->clone());
      hold(bytes);
    } else if (c.partial->type() == dtype::f32) {
      add_values<float>(*c.partial, *g);
    } else {
      add_values<double>(*c.partial, *g);
    }
    held_bytes_ -= static_cast<std::int64_t>(g->nbytes());
    c.early.erase(it);
    ++c.next;
  }
  if (c.next < replicas_) return std::optional<std::vector<reduce_result>>{};
  std::vector<reduce_result> out(static_cast<std::size_t>(replicas_));
  held_bytes_ -= static_cast<std::int64_t>(c.partial->nbytes());
  out.back() = reduce_result{stage_, step, std::shared_ptr<const param_set>(std::move(c.partial))};
  chains_.erase(step);
  return std::optional<std::vector<reduce_result>>(std::move(out));
}

result<std::optional<std::vector<reduce_result>>> gradient_reducer::add(reduce_request request) {
  const bool weights = request.kind == reduce_kind::weights;
  const std::string who = "reducer of stage " + std::to_string(stage_) + ": replica " +
                          std::to_string(request.replica) + "'s " +
                          (weights ? "new version" : "gradient") + " of step " +
                          std::to_string(request.step);
  if (request.stage != stage_)
    return make_error(who + " is addressed to stage " + std::to_string(request.stage) +
                      "; send it to that stage's reducer");
  if (request.replica < 0 || request.replica >= replicas_)
    return make_error(who + " names a replica outside 0.." + std::to_string(replicas_ - 1));
  if (!request.grads) return make_error(who + " carries no gradient (null)");
  if (request.grads->type() != dtype::f32 && request.grads->type() != dtype::f64)
    return make_error(who + " holds " + std::string(dtype_name(request.grads->type())) +
                      " values; only F32 and F64 gradients can be summed");
  if (request.grads->where().kind != device_kind::cpu) {
    if (!gpu_at_ || weights || mode_ == reduce_mode::p2p || request.grads->type() != dtype::f32)
      return make_error(who + " is on " + request.grads->where().to_string() +
                        ", but this reducer sums on the host only (" +
                        (gpu_at_ ? "the p2p chain and ZeRO's versions are host values"
                                 : "it has no GPU") +
                        "); send it as a host copy");
    if (!gpu_) {
      try {
        gpu_ = std::make_shared<device_context>(device_context::cuda(gpu_at_->index));
      } catch (const std::exception& e) {
        return make_error("reducer of stage " + std::to_string(stage_) + ": " + e.what());
      }
    }
  }
  if (mode_ == reduce_mode::p2p) return add_to_chain(std::move(request), who);
  auto& slots = (weights ? versions_ : pending_)[request.step];
  if (slots.empty()) slots.resize(static_cast<std::size_t>(replicas_));
  for (const auto& other : slots) {
    if (other && !other->same_layout(*request.grads))
      return make_error(who + " has a different layout (names, shapes, blocks or dtype) from the " +
                        "other replicas'; every replica of a stage must hold the same blocks");
    if (other && (other->where().kind == device_kind::cpu) !=
                     (request.grads->where().kind == device_kind::cpu))
      return make_error(who + " is on " + request.grads->where().to_string() + ", another's on " +
                        other->where().to_string() + ": the replicas' gradients come all on the "
                        "host or all on GPUs");
  }
  auto& slot = slots[static_cast<std::size_t>(request.replica)];
  if (slot) return make_error(who + " arrived twice");
  hold(static_cast<std::int64_t>(request.grads->nbytes()));
  slot = std::move(request.grads);
  for (const auto& g : slots)
    if (!g) return std::optional<std::vector<reduce_result>>{};
  if (weights) {  // each tensor from its owner; one version shared by every replica
    auto whole = compose_shards(slots, shard_owners(*slots[0], replicas_));
    if (!whole) return make_error(who + ": " + whole.message());
    for (const auto& v : slots) held_bytes_ -= static_cast<std::int64_t>(v->nbytes());
    versions_.erase(request.step);
    std::shared_ptr<const param_set> shared = std::make_shared<const param_set>(std::move(*whole));
    std::vector<reduce_result> out;
    for (int r = 0; r < replicas_; ++r)
      out.push_back(reduce_result{stage_, request.step, shared, reduce_kind::weights, {}});
    return std::optional<std::vector<reduce_result>>(std::move(out));
  }

  // Everyone is here: sum in replica order 0..w-1, whatever order they came in.
  std::shared_ptr<param_set> sum;
  try {
    sum = std::make_shared<param_set>(sum_in_order(slots));
  } catch (const std::exception& e) {  // a GPU's error, or its allocator's limit
    return make_error(who + ": the sum failed: " + e.what());
  }
  hold(static_cast<std::int64_t>(sum->nbytes()));
  for (const auto& g : slots) held_bytes_ -= static_cast<std::int64_t>(g->nbytes());
  held_bytes_ -= static_cast<std::int64_t>(sum->nbytes());
  pending_.erase(request.step);
  std::vector<reduce_result> out;
  out.reserve(static_cast<std::size_t>(replicas_));
  std::shared_ptr<const param_set> shared = std::move(sum);  // read-only: each replica copies it
  for (int r = 0; r < replicas_; ++r) out.push_back(reduce_result{stage_, request.step, shared});
  return std::optional<std::vector<reduce_result>>(std::move(out));
}

}  // namespace pipeworks
