// Benchmark: one GPT training step (forward, backward, clipping-free AdamW) on a GPU through the
// device seam, for gpt-small and a GPT-2-124M shape; prints JSON lines for bench/gpu_step.sh.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/device/device_context.hpp"
#include "ops/model/gpt.hpp"
#include "ops/train/trainer.hpp"
#include "bench/random_tokens.hpp"

using namespace pipeworks;
using bench::random_tokens;
using clock_type = std::chrono::steady_clock;

namespace {

struct shape {
  gpt_config cfg;
  int batch;
};

// The shapes of bench/torch_gpu_step.py.
shape shape_named(const std::string& name) {
  if (name == "gpt-small") return {gpt_small(), 8};
  return {gpt_config{1024, 12, 12, 768, 256}, 8};  // gpt2-124m
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gpu_step: a GPT training step on a GPU, step time and achieved TFLOP/s"};
  std::string name = "gpt-small", dev_name = "cuda:0";
  int warmup = 3, steps = 10;
  bool tf32 = false, bf16 = false;
  app.add_option("--shape", name, "gpt-small or gpt2-124m")
      ->check(CLI::IsMember({"gpt-small", "gpt2-124m"}));
  app.add_option("--device", dev_name, "cuda:N");
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_flag("--tf32", tf32, "let the GEMMs use TF32 tensor cores");
  app.add_flag("--bf16", bf16, "linear layers multiply in bf16 (fp32 accumulation), as train --bf16");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto where = parse_device(dev_name);
    if (!where || where->kind != device_kind::cuda) {
      std::fprintf(stderr, "bench_gpu_step: --device must be cuda or cuda:N, got %s\n",
                   dev_name.c_str());
      return 2;
    }
    const device_context gpu = device_context::cuda(where->index, gpu_math_of(tf32, bf16));
    const shape s = shape_named(name);
    model<float> m = make_gpt<float>(s.cfg);
    train_config tc;
    tc.steps = warmup + steps;
    tc.optim = default_optimizer_config(optimizer_kind::adamw);
    tc.optim.lr = 1e-4;
    tc.optim.weight_decay = 0.1;
    trainer<float> tr(m, m.init_params(1), tc, gpu);
    std::vector<double> times;
    for (int i = 0; i < warmup + steps; ++i) {
      minibatch mb = random_tokens(s.batch, s.cfg.context, 7 + i);
      auto r = tr.step(mb);  // ends when the GPU has finished the update
      if (!r) {
        std::fprintf(stderr, "bench_gpu_step: %s\n", r.message().c_str());
        return 1;
      }
      if (i >= warmup) times.push_back(r->step_s);
    }
    std::sort(times.begin(), times.end());
    std::int64_t fwd_per_sample = 0;
    for (const auto& c : m.costs()) fwd_per_sample += c.flops_per_sample;
    const double step_flops = 3.0 * double(fwd_per_sample) * s.batch;
    const double ms = 1000 * times[times.size() / 2];
    std::printf("{\"measure\": \"step\", \"impl\": \"pipeworks\", \"shape\": \"%s\", \"tf32\": %s, "
                "\"bf16\": %s, \"params\": %lld, \"ms_median\": %.3f, \"ms_min\": %.3f, \"step_tflop\": %.4f, "
                "\"tflops\": %.3f}\n",
                name.c_str(), tf32 ? "true" : "false", bf16 ? "true" : "false", static_cast<long long>(m.param_count()), ms,
                1000 * times.front(), step_flops / 1e12, step_flops / (ms / 1000) / 1e12);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
