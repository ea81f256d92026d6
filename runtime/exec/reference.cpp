// reference_train: the pipelined run's semantics on one thread. Each step's minibatch is dealt to
// the replicas; every microbatch runs forward then backward through the virtual stages at the
// versions the schedule's table names; each update sums the replicas' gradients it covers.
#include "runtime/exec/reference.hpp"
#include "base/exception_text.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "ops/model/param_split.hpp"
#include "ops/train/stage_optimizer.hpp"
#include "runtime/exec/data_split.hpp"

namespace pipeworks {

namespace {

// Checks the shapes the reference relies on; the version numbers are checked as they are used.
status check_inputs(int blocks, const schedule& plan, const std::vector<int>& boundaries,
                    const param_set& initial, dtype want) {
  const schedule_params& p = plan.params;
  if (p.microbatches < 1 || p.replicas < 1 || p.steps < 0)
    return make_error("reference: the schedule has m = " + std::to_string(p.microbatches) +
                      ", w = " + std::to_string(p.replicas) +
                      ", steps = " + std::to_string(p.steps) + "; m and w must be at least 1");
  if (plan.virtual_stages < 1 || static_cast<int>(boundaries.size()) != plan.virtual_stages + 1)
    return make_error("reference: the schedule has " + std::to_string(plan.virtual_stages) +
                      " virtual stages, so it needs " + std::to_string(plan.virtual_stages + 1) +
                      " stage boundaries; got " + std::to_string(boundaries.size()));
  if (initial.type() != want)
    return make_error("reference: the initial parameters are " +
                      std::string(dtype_name(initial.type())) + " but the model computes in " +
                      std::string(dtype_name(want)));
  if (initial.first_block() != 0 || initial.end_block() != blocks)
    return make_error("reference: the initial parameters cover blocks [" +
                      std::to_string(initial.first_block()) + ", " +
                      std::to_string(initial.end_block()) + ") but the model has blocks [0, " +
                      std::to_string(blocks) + "); pass the whole model's parameters");
  const int total = p.microbatches * p.steps;
  if (static_cast<int>(plan.versions.size()) != plan.virtual_stages)
    return make_error("reference: the version table has " + std::to_string(plan.versions.size()) +
                      " rows for " + std::to_string(plan.virtual_stages) + " virtual stages");
  for (int s = 0; s < plan.virtual_stages; ++s)
    if (static_cast<int>(plan.versions[s].size()) < total)
      return make_error("reference: the version table of stage " + std::to_string(s) + " has " +
                        std::to_string(plan.versions[s].size()) + " microbatches, fewer than " +
                        "the run's " + std::to_string(total) + " (steps * m)");
  return {};
}

// The version stage s uses for microbatch id: F and B equal, and already made (`made` updates
// of that stage have been applied when it runs).
result<int> version_for(const schedule& plan, int s, int id, int made) {
  const version_use v = plan.versions[s][id];
  const std::string where = "stage " + std::to_string(s) + ", microbatch " + std::to_string(id) +
                            " (step " + std::to_string(id / plan.params.microbatches) + ")";
  if (v.forward != v.backward)
    return make_error("reference: " + where + " uses version " + std::to_string(v.forward) +
                      " for its forward and " + std::to_string(v.backward) + " for its backward; " +
                      "the reference requires equal F/B versions (weight stashing)");
  if (v.forward < 0 || v.forward > made)
    return make_error("reference: " + where + " names version " + std::to_string(v.forward) +
                      ", but only versions 0.." + std::to_string(made) + " exist when it runs");
  return v.forward;
}

// update[r][s][id]: the update of stage s that replica r's gradient of microbatch id goes into,
// the number of STEP(s) before its last backward (B or W) in the rank's program; with replicas,
// of REDUCE(s), where the gradient leaves (under cyclic's p2p reduce a replica's STEP comes
// later, after backwards of the next update). That is id / m for every built-in schedule but
// cyclic with w > 1, whose replica q closes its updates floor(q m / w) microbatches later.
// Programs without STEPs (steps_known false) use id / m.
result<std::vector<std::vector<std::vector<int>>>> gradient_updates(const schedule& plan) {
  const int S = plan.virtual_stages, m = plan.params.microbatches, w = plan.params.replicas;
  const int total = plan.total_microbatches(), steps = plan.params.steps;
  std::vector<std::vector<std::vector<int>>> update(
      w, std::vector<std::vector<int>>(S, std::vector<int>(total, -1)));
  const bool from_programs = plan.steps_known && static_cast<int>(plan.device_of.size()) == S &&
                             plan.ranks() == plan.params.stages * w;
  for (int r = 0; r < w; ++r)
    for (int s = 0; s < S; ++s) {
      std::vector<int>& u = update[r][s];
      if (from_programs) {
        int made = 0;
        for (const action& a : plan.programs[plan.rank_of(r, plan.device_of[s])]) {
          if (a.stage != s) continue;
          if (a.kind == (w > 1 ? action_kind::reduce : action_kind::step)) ++made;
          if ((a.kind == action_kind::backward || a.kind == action_kind::weight_grad) &&
              a.microbatch >= 0 && a.microbatch < total)
            u[a.microbatch] = made;
        }
      }
      for (int id = 0; id < total; ++id) {
        if (u[id] < 0) u[id] = id / m;
        if (u[id] >= steps)
          return make_error("reference: replica " + std::to_string(r) + " runs the backward of " +
                            "microbatch " + std::to_string(id) + " on stage " + std::to_string(s) +
                            " after its last STEP, so that gradient would never be applied");
      }
    }
  return update;
}

// oldest[s][id]: the smallest version stage s uses for microbatches id.. (older ones can go).
std::vector<std::vector<int>> oldest_needed(const schedule& plan) {
  const int total = plan.total_microbatches();
  std::vector<std::vector<int>> oldest(plan.virtual_stages,
                                       std::vector<int>(total + 1, plan.params.steps));
  for (int s = 0; s < plan.virtual_stages; ++s)
    for (int id = total - 1; id >= 0; --id)
      oldest[s][id] = std::min(oldest[s][id + 1], plan.versions[s][id].forward);
  return oldest;
}


}  // namespace

template <class T>
result<std::vector<param_set>> reference_train(const model<T>& m, const schedule& plan,
                                               const std::vector<int>& boundaries,
                                               const param_set& initial, const train_config& cfg,
                                               const minibatch_fn& data) {
  if (plan.routes > 1) {
    // Routes (dualpipe): each route's copy of a stage is a data-parallel replica of it, member
    // r * w + q, with the route's own microbatches; the copies' summed gradient makes every
    // copy's next version. So the reference is that of one route over w * routes replicas
    // (GPipe's, a flush: the same versions), each copy taking its stage's weights.
    auto one = make_schedule(schedule_kind::gpipe,
                             {plan.route_stages(), plan.params.microbatches, 1,
                              plan.params.replicas * plan.routes, plan.params.steps});
    if (!one) return make_error("reference: " + one.message());
    auto pieces = reference_train(m, *one, boundaries, initial, cfg, data);
    if (!pieces) return pieces.err();
    std::vector<param_set> out;
    for (int s = 0; s < plan.virtual_stages; ++s)
      out.push_back((*pieces)[static_cast<std::size_t>(plan.piece_of(s))].clone());
    return out;
  }
  if (status s = check_inputs(m.size(), plan, boundaries, initial, dtype_of<T>()); !s)
    return make_error(s.message());
  if (status s = validate(cfg); !s) return make_error("reference: " + s.message());
  auto split = split_params(initial, boundaries);
  if (!split) return make_error("reference: " + split.message());
  const int stages = plan.virtual_stages, mbs = plan.params.microbatches;
  const int replicas = plan.params.replicas, steps = plan.params.steps;
  const int total = plan.total_microbatches();
  auto update = gradient_updates(plan);
  if (!update) return update.err();
  // last[s][u]: the last microbatch id (over the replicas) whose gradient goes into update u of
  // stage s; -1 when none does. Update u is applied once that microbatch has run.
  std::vector<std::vector<int>> last(stages, std::vector<int>(steps, -1));
  for (int r = 0; r < replicas; ++r)
    for (int s = 0; s < stages; ++s)
      for (int id = 0; id < total; ++id) {
        int& l = last[s][(*update)[r][s][id]];
        l = std::max(l, id);
      }

  // hist[s][v]: version v of stage s (null once no later microbatch can use it).
  std::vector<std::vector<param_snapshot>> hist(stages);
  std::vector<stage_optimizer<T>> optimizers;
  // grads[{r, s, u}]: replica r's gradient of stage s for update u, while u is open.
  std::map<std::tuple<int, int, int>, param_set> grads;
  for (int s = 0; s < stages; ++s) {
    param_set& p = (*split)[s];
    optimizers.emplace_back(p, cfg);
    hist[s].push_back(std::make_shared<const param_set>(std::move(p)));
  }
  auto grad_buffer = [&](int r, int s, int u) -> param_set& {
    auto it = grads.find({r, s, u});
    if (it == grads.end())
      it = grads.emplace(std::tuple{r, s, u}, hist[s].back()->zeros_like()).first;
    return it->second;
  };
  const auto oldest = oldest_needed(plan);
  const bool global_clip = is_flush(plan.kind) && cfg.clip_grad_norm > 0;
  const T scale = T(1) / static_cast<T>(mbs * replicas);

  // Microbatches in id order, every replica's; an update is applied as soon as its last
  // contribution is in, so later microbatches can use the version it makes.
  std::vector<std::vector<microbatch>> dealt;
  for (int id = 0; id < total; ++id) {
    const int t = id / mbs, k = id % mbs;
    if (k == 0) {
      auto mb = data(t);
      if (!mb) return make_error(mb.message());
      auto d = deal_microbatches(*mb, replicas, mbs);
      if (!d) return make_error("reference, step " + std::to_string(t) + ": " + d.message());
      dealt = std::move(*d);
    }
    std::vector<int> version(stages);
    for (int s = 0; s < stages; ++s) {
      auto v = version_for(plan, s, id, static_cast<int>(hist[s].size()) - 1);
      if (!v) return make_error(v.message());
      version[s] = *v;
    }
    for (int r = 0; r < replicas; ++r) {
      microbatch& u = dealt[r][k];
      std::vector<std::vector<stash>> saved(stages);
      try {
        tensor x = std::move(u.input);
        for (int s = 0; s < stages; ++s) {
          stage_forward f = forward_blocks(m, *hist[s][version[s]], std::move(x), u.ctx);
          saved[s] = std::move(f.saved);
          x = std::move(f.output);
        }
        tensor dout = scalar_tensor<T>(scale);
        for (int s = stages - 1; s >= 0; --s)
          dout = backward_blocks(m, *hist[s][version[s]], grad_buffer(r, s, (*update)[r][s][id]),
                                 std::move(saved[s]), std::move(dout), u.ctx);
      } catch (const std::exception& e) {
        return make_error("reference: replica " + std::to_string(r) + ", microbatch " +
                          std::to_string(id) + ": " + exception_text(e));
      }
    }
    // Flush schedules clip by the global norm: every stage closes update n at the same
    // microbatch; their per-tensor squared norms are added in order, as the driver does.
    std::map<int, double> global_sq;
    if (global_clip)
      for (int s = 0; s < stages; ++s)
        for (int n = static_cast<int>(hist[s].size()) - 1; n < steps && last[s][n] <= id; ++n) {
          param_set& sum = grad_buffer(0, s, n);
          for (int r = 1; r < replicas; ++r) add_values<T>(sum, grad_buffer(r, s, n));
          for (int r = 1; r < replicas; ++r) grads.erase({r, s, n});
          global_sq[n] = fold_squares(tensor_squares<T>(sum), global_sq[n]);
        }
    for (int s = 0; s < stages; ++s) {
      for (int n = static_cast<int>(hist[s].size()) - 1; n < steps && last[s][n] <= id; ++n) {
        // The replicas' sum, added in replica order as the reducer does.
        param_set& sum = grad_buffer(0, s, n);
        if (!global_clip)
          for (int r = 1; r < replicas; ++r) add_values<T>(sum, grad_buffer(r, s, n));
        std::optional<double> sq;
        if (global_clip) sq = global_sq.at(n);
        auto next = optimizers[s].apply(hist[s][n], sum, n, sq);
        if (!next)
          return make_error("reference: stage " + std::to_string(s) + ": " + next.message());
        hist[s].push_back(std::move(*next));
        for (int r = 0; r < replicas; ++r) grads.erase({r, s, n});
      }
      // Drop versions no later microbatch uses (the latest always stays).
      const int keep = std::min(oldest[s][id + 1], static_cast<int>(hist[s].size()) - 1);
      for (int v = 0; v < keep; ++v) hist[s][v].reset();
    }
  }
  std::vector<param_set> out;
  for (int s = 0; s < stages; ++s) out.push_back(hist[s].back()->clone());
  return out;
}

template result<std::vector<param_set>> reference_train<float>(const model<float>&, const schedule&,
                                                               const std::vector<int>&,
                                                               const param_set&,
                                                               const train_config&,
                                                               const minibatch_fn&);
template result<std::vector<param_set>> reference_train<double>(
    const model<double>&, const schedule&, const std::vector<int>&, const param_set&,
    const train_config&, const minibatch_fn&);

}  // namespace pipeworks
