// Shared pieces of the actor tests: a small mlp, deterministic synthetic minibatches, an SGD
// config, the single-device reference, a relative weight comparison and a plan over two workers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "actors/pipeline.hpp"
#include "ops/model/mlp.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_split.hpp"
#include "ops/train/trainer.hpp"

namespace pipeworks::test {

// gpt-tiny under 1F1B on two stages, a rank on each of two worker processes (7001, 7002).
inline run_plan two_workers_plan() {
  run_plan p;
  p.model = *parse_model_spec("gpt-tiny");
  p.schedule = schedule_kind::one_f_one_b;
  p.stages = 2;
  p.train.microbatches = 2;
  p.train.steps = 2;
  p.split = {0, 2};
  p.processes.workers = {"127.0.0.1:7001", "127.0.0.1:7002"};
  place_ranks(p);
  return p;
}

inline model<float> small_mlp() { return make_mlp<float>(mlp_config{12, {16, 8}, 4}); }

// Step t's minibatch of B samples: inputs f32 (B, 12) from a smooth formula, targets i32 (B).
inline minibatch synthetic_minibatch(std::int64_t t, std::int64_t B = 16) {
  minibatch mb{tensor({B, 12}, dtype::f32), tensor({B}, dtype::i32)};
  float* x = mb.inputs.data<float>();
  for (std::int64_t i = 0; i < B * 12; ++i)
    x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * static_cast<double>(t)));
  std::int32_t* y = mb.targets.data<std::int32_t>();
  for (std::int64_t i = 0; i < B; ++i) y[i] = static_cast<std::int32_t>((7 * i + 3 * t) % 4);
  return mb;
}

inline minibatch_fn synthetic_data(std::int64_t B = 16) {
  return [B](std::int64_t t) -> result<minibatch> { return synthetic_minibatch(t, B); };
}

inline train_config sgd(std::int64_t steps, double lr = 0.05) {
  train_config c;
  c.steps = steps;
  c.optim = default_optimizer_config(optimizer_kind::sgd);
  c.optim.lr = lr;
  c.min_lr = lr;
  return c;
}

// The single-device trainer's weights after cfg.steps steps of `microbatches` microbatches.
inline param_snapshot reference_weights(const model<float>& net, const param_set& initial,
                                        train_config cfg, int microbatches, std::int64_t B = 16) {
  cfg.microbatches = microbatches;
  trainer<float> t(net, initial.clone(), cfg);
  auto last = train_loop(t, synthetic_data(B), {});
  if (!last) throw pipeworks_error(last.message());
  return t.weights();
}

// max |a - b| / max |b| over the whole model; a layout mismatch is infinitely far.
inline double relative_difference(const model_weights& stages, const param_set& want) {
  auto joined = join_params(stages);
  if (!joined || !joined->same_layout(want)) return INFINITY;
  auto a = std::as_const(*joined).values<float>();
  auto b = want.values<float>();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The plan of a 1F1B run of small_mlp over p stages and m microbatches, SGD, 16 samples per
// step from a callback, no clipping (the reference trainer above does not clip either).
inline run_plan one_f_one_b(int p, int m, std::int64_t steps) {
  run_plan o;
  o.model = model_spec{"small-mlp", mlp_config{12, {16, 8}, 4}};
  o.schedule = schedule_kind::one_f_one_b;
  o.stages = p;
  o.train = sgd(steps);
  o.train.microbatches = m;
  o.data.batch = 16;
  return o;
}

}  // namespace pipeworks::test
