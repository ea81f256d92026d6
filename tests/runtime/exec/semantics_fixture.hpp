// Shared by the semantics tests (one thread here, CAF actors in tests/actors): the grid of
// schedules and sizes, the small models and their data, and the weight comparison.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks::test {

struct semantics_case {
  schedule_kind kind;
  int p, m, w, v;
  bool gpt;
  reduce_mode reduce = reduce_mode::collective;
  std::string name() const {
    return std::string(schedule_name(kind)) + " p=" + std::to_string(p) + " m=" +
           std::to_string(m) + " w=" + std::to_string(w) + " v=" + std::to_string(v) +
           (gpt ? " gpt-tiny" : " mlp") + (reduce == reduce_mode::p2p ? " p2p" : "");
  }
  schedule_params params(int steps) const { return {p, m, v, w, steps, reduce}; }
};

inline const std::vector<schedule_kind>& all_kinds = every_schedule_kind();

// p in {2, 3, 4}, m in {1, p-1, p, 2p+1} (dualpipe: 2p and 2p+2, p even), w in {1, 2}; v = 2 for
// the schedules that interleave, the V schedules and dualpipe.
// Cases the generator refuses are left out by the caller (make_schedule says why).
inline std::vector<semantics_case> semantics_grid(bool gpt) {
  std::vector<semantics_case> out;
  for (schedule_kind k : all_kinds)
    for (int p : {2, 3, 4}) {
      std::vector<int> ms{1, p - 1, p, 2 * p + 1};
      if (default_routes(k) > 1) ms = {2 * p, 2 * p + 2};  // dualpipe: m even and >= 2p
      std::sort(ms.begin(), ms.end());
      ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
      const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
      for (int m : ms)
        for (int w : {1, 2}) out.push_back({k, p, m, w, v, gpt});
    }
  return out;
}

// Cyclic with the p2p reduce: p in {2, 3, 4}, w in {2, 3, 4}, m from the smallest the generator
// permits (ceil(m / w) >= p - 1) to two past it.
inline std::vector<semantics_case> p2p_grid(bool gpt) {
  std::vector<semantics_case> out;
  for (int p : {2, 3, 4})
    for (int w : {2, 3, 4}) {
      const int least = std::max(1, w * (p - 2) + 1);
      for (int m : {least, least + 1, least + 2})
        out.push_back({schedule_kind::cyclic, p, m, w, 1, gpt, reduce_mode::p2p});
    }
  return out;
}

// Eight blocks, so that p * v up to 8 virtual stages all get one.
inline mlp_config small_mlp() { return mlp_config{12, {16, 16, 12, 12, 10, 10, 8}, 4}; }
// gpt-tiny's width, heads and vocabulary; 2 layers (gpt-tiny itself, 4 blocks) when p * v <= 4,
// else 6 layers (8 blocks).
inline gpt_config tiny_gpt(int virtual_stages) {
  gpt_config c = gpt_tiny();
  if (virtual_stages > 4) c.layers = 6;
  return c;
}
inline constexpr std::int64_t gpt_tokens = 16;

// Boundaries of `stages` stages over `blocks` blocks, as even as integer division makes them.
inline std::vector<int> even_blocks(int blocks, int stages) {
  std::vector<int> b;
  for (int s = 0; s <= stages; ++s) b.push_back(s * blocks / stages);
  return b;
}  // tokens per sample

// Step t's minibatch of B samples: deterministic in (seed, t).
inline minibatch semantics_data(bool gpt, std::int64_t B, std::int64_t t, dtype dt) {
  std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(t));
  if (gpt) {
    minibatch mb{tensor({B, gpt_tokens}, dtype::i32), tensor({B, gpt_tokens}, dtype::i32)};
    std::vector<int> seq(static_cast<std::size_t>(gpt_tokens + 1));
    for (std::int64_t b = 0; b < B; ++b) {
      for (int& x : seq) x = static_cast<int>(rng() % 64) + 32;
      for (std::int64_t i = 0; i < gpt_tokens; ++i) {
        mb.inputs.data<std::int32_t>()[b * gpt_tokens + i] = seq[i];
        mb.targets.data<std::int32_t>()[b * gpt_tokens + i] = seq[i + 1];
      }
    }
    return mb;
  }
  const mlp_config c = small_mlp();
  minibatch mb{tensor({B, c.inputs}, dt), tensor({B}, dtype::i32)};
  std::normal_distribution<double> n(0.0, 1.0);
  for (std::int64_t i = 0; i < B * c.inputs; ++i) {
    if (dt == dtype::f32) mb.inputs.data<float>()[i] = static_cast<float>(n(rng));
    else mb.inputs.data<double>()[i] = n(rng);
  }
  for (std::int64_t b = 0; b < B; ++b)
    mb.targets.data<std::int32_t>()[b] = static_cast<int>(rng() % c.classes);
  return mb;
}

// SGD with momentum, a rate large enough that the versions differ visibly, and the gradient
// clipped as `pipeworks train` does by default (global for flush schedules, per stage for the
// others), at norm 0.25 rather than the default 1 so that clipping is at work on these models.
inline train_config semantics_train(int steps, int m, bool gpt) {
  train_config c;
  c.steps = steps;
  c.microbatches = m;
  c.optim = default_optimizer_config(optimizer_kind::sgd);
  c.optim.lr = gpt ? 0.5 : 0.1;
  c.min_lr = c.optim.lr;
  c.clip_grad_norm = 0.25;
  return c;
}

// One case made ready to run: its lowered schedule, model, initial weights, split, training
// config and data. adamw: AdamW for every kind (else semantics_train's SGD, AdamW for 2bw and
// pipedream, whose stale versions SGD at this rate would make diverge).
struct case_run {
  std::shared_ptr<const schedule> plan;
  model<float> mdl;
  param_set initial;
  std::vector<int> bounds;
  train_config cfg;
  minibatch_fn data;
};

// The case's run; nullopt when the generator refuses the case.
inline std::optional<case_run> make_case_run(const semantics_case& c, int steps,
                                             bool adamw = false) {
  auto made = make_schedule(c.kind, c.params(steps));
  if (!made) return std::nullopt;
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  const int S = plan->virtual_stages;
  model<float> mdl = c.gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  param_set initial = mdl.init_params(7);
  std::vector<int> bounds = even_blocks(mdl.size(), plan->route_stages());  // dualpipe: p pieces
  train_config cfg = semantics_train(steps, c.m, c.gpt);
  if (adamw || c.kind == schedule_kind::two_bw || c.kind == schedule_kind::pipedream)
    cfg.optim = default_optimizer_config(optimizer_kind::adamw);
  const std::int64_t B = 2 * c.m * c.w;
  const bool gpt = c.gpt;
  minibatch_fn data = [gpt, B](std::int64_t t) -> result<minibatch> {
    return semantics_data(gpt, B, t, dtype::f32);
  };
  return case_run{std::move(plan), std::move(mdl), std::move(initial), std::move(bounds), cfg,
                  std::move(data)};
}

// max |a - b| / max |b| over the arena.
template <class T>
double max_relative_difference(const param_set& a, const param_set& b) {
  auto x = a.values<T>();
  auto y = b.values<T>();
  if (x.size() != y.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// Whether a and b have the same layout and the same bits.
inline bool same_bits(const param_set& a, const param_set& b) {
  return a.same_layout(b) && a.nbytes() == b.nbytes() &&
         std::memcmp(a.arena().bytes(), b.arena().bytes(), a.nbytes()) == 0;
}

}  // namespace pipeworks::test
