// driver_core: inputs dealt per step and cached until consumed, global norms summed in tensor
// order, per-step tallies of losses and replica 0's step reports, checkpoint files counted.
#include "runtime/exec/driver_core.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <variant>

#include "ops/train/stage_optimizer.hpp"
#include "runtime/exec/data_split.hpp"

namespace pipeworks {

driver_core::driver_core(std::shared_ptr<const schedule> programs, minibatch_fn data,
                         std::function<double()> clock, std::int64_t first_step,
                         std::int64_t samples)
    : plan_(std::move(programs)), data_(std::move(data)), clock_(std::move(clock)),
      first_step_(first_step), steps_done_(first_step), samples_(samples) {
  p_ = plan_->params.stages;
  m_ = plan_->params.microbatches;
  // With routes (dualpipe) the inputs are dealt to members, route r of replica q being member
  // r * w + q, and the model's stages are one route's: the other routes' copies report nothing new.
  w_ = plan_->params.replicas * plan_->routes;
  V_ = plan_->route_stages();
  steps_ = plan_->params.steps;
  last_step_end_ = clock_ ? clock_() : 0.0;
  samples_at_[first_step] = samples;
}

status driver_core::receive(message msg, std::vector<outgoing>& out) {
  if (auto* req = std::get_if<input_request>(&msg)) return on_input(*req, out);
  if (auto* loss = std::get_if<loss_report>(&msg)) return on_loss(*loss);
  if (auto* rep = std::get_if<step_report>(&msg)) return on_step_report(std::move(*rep));
  if (auto* n = std::get_if<norm_request>(&msg)) return on_norm(std::move(*n), out);
  return make_error("the driver received a message meant for another actor (variant index " +
                    std::to_string(msg.index()) + ")");
}

status driver_core::on_input(const input_request& req, std::vector<outgoing>& out) {
  const std::int64_t t = req.microbatch / m_;
  const int k = req.microbatch % m_;
  if (req.replica < 0 || req.replica >= w_ || req.microbatch < 0 || t >= steps_ || t < first_step_)
    return make_error("replica " + std::to_string(req.replica) + " asked for microbatch " +
                      std::to_string(req.microbatch) + ", outside the run's steps " +
                      std::to_string(first_step_ + 1) + ".." + std::to_string(steps_));
  auto it = inputs_.find(t);
  if (it == inputs_.end()) {
    if (t < steps_done_ || dealt_.count(t))
      return make_error("microbatch " + std::to_string(req.microbatch) + " of replica " +
                        std::to_string(req.replica) + " was asked for twice");
    auto mb = data_(t);
    if (!mb) return make_error("the data for step " + std::to_string(t + 1) + ": " + mb.message());
    const std::int64_t B = mb->inputs.rank() > 0 ? mb->inputs.dim(0) : 0;
    auto parts = deal_microbatches(*mb, w_, m_);
    if (!parts)
      return make_error("the minibatch of step " + std::to_string(t + 1) + ": " + parts.message());
    tallies_[t].samples = B;
    dealt_.insert(t);
    it = inputs_.emplace(t, dealt_step{std::move(*parts), w_ * m_}).first;
  }
  auto& slot = it->second.parts.at(static_cast<std::size_t>(req.replica)).at(static_cast<std::size_t>(k));
  if (slot.input.empty())
    return make_error("microbatch " + std::to_string(req.microbatch) + " of replica " +
                      std::to_string(req.replica) + " was asked for twice");
  activation_msg a;
  a.replica = plan_->member_replica(req.replica);
  a.stage = plan_->member_stage(req.replica, 0);  // the first stage of the member's route
  a.microbatch = req.microbatch;
  a.data = tensor_payload(std::move(slot.input));
  a.ctx = std::move(slot.ctx);
  const int rank = plan_->rank_of(a.replica, plan_->device_of.at(static_cast<std::size_t>(a.stage)));
  out.push_back(outgoing{endpoint{endpoint_kind::rank, rank}, std::move(a)});
  if (--it->second.left == 0) inputs_.erase(it);
  return {};
}

status driver_core::on_loss(const loss_report& r) {
  if (!std::isfinite(r.loss))
    return make_error("stage " + std::to_string(V_ - 1) + ", replica " + std::to_string(r.replica) +
                      ", action " + to_string(action{V_ - 1, action_kind::forward, r.microbatch}) +
                      ": the loss is not finite (" + std::to_string(r.loss) + ")");
  const std::int64_t t = r.microbatch / m_;
  if (t < steps_done_) return {};  // a step tallied before this run resumed
  step_tally& tally = tallies_[t];
  ++tally.losses;
  tally.loss_sum += r.loss;
  complete_steps();
  return {};
}

status driver_core::on_step_report(step_report rep) {
  // Every replica has the same version; the one that made it speaks (replica 0, or under the p2p
  // reduce the last, the only one that runs the optimizer and knows the gradient's norm).
  const int speaker = plan_->params.reduce == reduce_mode::p2p ? plan_->params.replicas - 1 : 0;
  if (rep.replica != speaker) return {};
  if (rep.stage < 0 || rep.stage >= plan_->virtual_stages)
    return make_error("a step report for unknown stage " + std::to_string(rep.stage));
  if (rep.stage >= V_) return {};  // a copy on another route: its stage's first copy speaks
  if (rep.step < steps_done_) return {};
  step_tally& t = tallies_[rep.step];
  t.weights.resize(static_cast<std::size_t>(V_));
  t.reported.resize(static_cast<std::size_t>(V_));
  if (t.reported[static_cast<std::size_t>(rep.stage)])
    return make_error("stage " + std::to_string(rep.stage) + " reported step " +
                      std::to_string(rep.step + 1) + " twice");
  t.reported[static_cast<std::size_t>(rep.stage)] = true;
  t.grad_sq.resize(static_cast<std::size_t>(V_));
  t.grad_sq[static_cast<std::size_t>(rep.stage)] = rep.grad_sq;
  if (rep.weights) {
    t.weights[static_cast<std::size_t>(rep.stage)] = std::move(rep.weights);
    ++t.published;
  }
  ++t.reports;
  t.lr = rep.lr;
  complete_steps();
  return {};
}

// Global clipping: the replica's stages' per-tensor sums, concatenated in stage (= tensor) order and
// added left to right, as the single-device trainer adds its per-tensor sums.
status driver_core::on_norm(norm_request req, std::vector<outgoing>& out) {
  if (req.replica < 0 || req.replica >= plan_->params.replicas || req.stage < 0 ||
      req.stage >= plan_->virtual_stages)
    return make_error("a gradient norm from replica " + std::to_string(req.replica) + ", stage " +
                      std::to_string(req.stage) + ", which the run does not have");
  if (req.stage >= V_) return {};  // a copy on another route: the same gradient as the first
  norm_tally& n = norms_[{req.replica, req.step}];
  n.by_stage.resize(static_cast<std::size_t>(V_));
  auto& slot = n.by_stage[static_cast<std::size_t>(req.stage)];
  if (!slot.empty() || req.tensor_sq.empty())
    return make_error("stage " + std::to_string(req.stage) + " sent its gradient norm of step " +
                      std::to_string(req.step + 1) + " twice, or an empty one");
  slot = std::move(req.tensor_sq);
  if (++n.arrived < V_) return {};
  double sq = 0;
  for (const auto& stage : n.by_stage) sq = fold_squares(stage, sq);
  norms_.erase({req.replica, req.step});
  for (int d = 0; d < p_; ++d)
    out.push_back(outgoing{endpoint{endpoint_kind::rank, plan_->rank_of(req.replica, d)},
                           norm_result{req.replica, req.step, sq}});
  return {};
}

// Emits every step, in order, whose stages all reported and whose losses all arrived.
void driver_core::complete_steps() {
  for (auto it = tallies_.find(steps_done_); it != tallies_.end(); it = tallies_.find(steps_done_)) {
    step_tally& t = it->second;
    if (t.reports < V_ || t.losses < w_ * m_) return;
    if (dealt_.insert(steps_done_).second) {
      // A resumed run's first step whose microbatches the ranks all held at the cut: nobody
      // asked for its minibatch, but its samples count all the same.
      if (auto mb = data_(steps_done_); mb && mb->inputs.rank() > 0) t.samples = mb->inputs.dim(0);
    }
    const double now = clock_ ? clock_() : 0.0;
    completed_step c;
    step_metrics& s = c.metrics;
    s.step = steps_done_ + 1;
    s.steps = steps_;
    s.loss = t.loss_sum / (w_ * m_);
    s.lr = t.lr;
    double sq = 0;
    for (double x : t.grad_sq) sq += x;  // in stage order, whatever order the reports came in
    s.grad_norm = std::sqrt(sq);
    s.step_s = now - last_step_end_;
    s.samples_per_s = s.step_s > 0 ? static_cast<double>(t.samples) / s.step_s : 0;
    s.elapsed_s = now;
    samples_ += t.samples;
    s.samples = samples_;
    last_step_end_ = now;
    if (t.published == V_) c.weights = std::make_shared<const model_weights>(std::move(t.weights));
    last_ = s;
    ++steps_done_;
    samples_at_[steps_done_] = samples_;
    tallies_.erase(it);
    // Every microbatch of a complete step has been through its F's: inputs still cached for it
    // are ones a resumed rank held at the cut and will never ask for.
    inputs_.erase(inputs_.begin(), inputs_.lower_bound(steps_done_));
    dealt_.erase(dealt_.begin(), dealt_.lower_bound(steps_done_));  // older ones: t < steps_done_
    completed_.push_back(std::move(c));
  }
}

std::vector<completed_step> driver_core::take_completed() { return std::exchange(completed_, {}); }

status driver_core::file_written(int rank, std::int64_t step) {
  if (rank < 0 || rank >= plan_->ranks() || step <= first_step_ || step >= steps_)
    return make_error("rank " + std::to_string(rank) + " wrote a checkpoint of step " +
                      std::to_string(step) + ", which this run does not take");
  auto& got = files_[step];
  got.resize(static_cast<std::size_t>(plan_->ranks()));
  if (got[static_cast<std::size_t>(rank)])
    return make_error("rank " + std::to_string(rank) + " wrote its checkpoint of step " +
                      std::to_string(step) + " twice");
  got[static_cast<std::size_t>(rank)] = true;
  return {};
}

std::vector<std::int64_t> driver_core::due_checkpoints() {
  std::vector<std::int64_t> due;
  for (auto it = files_.begin(); it != files_.end();) {
    bool all = true;
    for (bool b : it->second) all = all && b;
    if (all && it->first <= steps_done_) {
      due.push_back(it->first);
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

std::int64_t driver_core::samples_at(std::int64_t step) const {
  auto it = samples_at_.find(step);
  return it == samples_at_.end() ? 0 : it->second;
}

}  // namespace pipeworks
