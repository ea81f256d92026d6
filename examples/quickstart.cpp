// The library example of docs/embedding.md: train gpt-tiny on a few steps of text, then
// generate, lower, validate and simulate a zero-bubble schedule, all without the CLI.
#include <cstdio>

#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/data/text.hpp"
#include "ops/model/gpt.hpp"
#include "ops/train/sources.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"

using namespace pipeworks;

int main(int, char** argv) {
  run_with_best_blas_kernels(argv);
  set_cpu_threads(0);

  // A model is an ordered list of cuttable blocks; weights are immutable snapshots.
  model<float> m = make_gpt<float>(gpt_tiny());
  result<text_corpus> text = load_text("/usr/share/games/fortunes");
  if (!text) {
    std::fprintf(stderr, "%s\n", text.message().c_str());
    return 1;
  }
  train_config cfg;
  cfg.steps = 20;
  cfg.microbatches = 2;  // gradient accumulation over 2 microbatches per step
  cfg.optim = default_optimizer_config(optimizer_kind::adamw);
  cfg.optim.lr = 3e-3;
  trainer<float> t(m, m.init_params(/*seed=*/1), cfg);
  minibatch_fn batches = text_minibatches(text->view(), /*batch=*/8, gpt_tiny().context, 1);
  result<step_metrics> last = train_loop(t, batches, [](const step_metrics& s) {
    if (s.step % 5 == 0) std::printf("step %lld  loss %.3f\n", (long long)s.step, s.loss);
  });
  if (!last) {
    std::fprintf(stderr, "%s\n", last.message().c_str());
    return 1;
  }

  // A schedule is data: generate, lower, validate, simulate.
  result<schedule> zb = make_schedule(schedule_kind::zb_h1, {.stages = 4, .microbatches = 8});
  if (!zb) {
    std::fprintf(stderr, "%s\n", zb.message().c_str());
    return 1;
  }
  schedule lowered = lower_communication(*zb);
  if (status ok = validate(lowered); !ok) {
    std::fprintf(stderr, "%s\n", ok.message().c_str());
    return 1;
  }
  result<simulation> sim = simulate(lowered, uniform_costs(1, 2, 1));
  if (!sim) {
    std::fprintf(stderr, "%s\n", sim.message().c_str());
    return 1;
  }
  std::printf("zb-h1 p=4 m=8: makespan %.1f, bubble %.1f%%\n", sim->makespan,
              100 * sim->bubble_fraction);
  return 0;
}
