// Benchmark: one gpt-small training step (forward, backward, AdamW) at batch 8 on this CPU,
// beside the OpenBLAS sgemm rate measured in the same run. Prints a table, or JSON with --json.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/model/gpt.hpp"
#include "ops/train/trainer.hpp"
#include "bench/random_tokens.hpp"

using namespace pipeworks;
using bench::random_tokens;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The best of several large multi-threaded sgemm calls: this machine's practical fp32 limit.
double sgemm_gflops(int n, int threads) {
  openblas_set_num_threads(threads);
  std::vector<float> a(std::size_t(n) * n, 0.5f), b(std::size_t(n) * n, 0.25f), c(std::size_t(n) * n);
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = clock_type::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                n, 0.0f, c.data(), n);
    double s = seconds_since(t0);
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  run_with_best_blas_kernels(argv);
  CLI::App app{"bench_gpt_step: gpt-small training step time and achieved FLOP/s"};
  int batch = 8, threads = 2, warmup = 3, steps = 10, sgemm_n = 1024;
  bool json = false;
  app.add_option("--batch", batch, "samples per step")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--sgemm-n", sgemm_n, "size of the square sgemm")->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  set_cpu_threads(threads);
  double peak = sgemm_gflops(sgemm_n, threads);
  set_cpu_threads(threads);

  const gpt_config cfg = gpt_small();
  model<float> m = make_gpt<float>(cfg);
  train_config tc;
  tc.steps = warmup + steps;
  tc.optim = default_optimizer_config(optimizer_kind::adamw);
  tc.optim.lr = 1e-4;
  tc.optim.weight_decay = 0.1;
  trainer<float> tr(m, m.init_params(1), tc);
  minibatch mb = random_tokens(batch, cfg.context, 7);

  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    auto t0 = clock_type::now();
    auto r = tr.step(mb);
    double s = seconds_since(t0);
    if (!r) {
      std::fprintf(stderr, "bench_gpt_step: %s\n", r.message().c_str());
      return 1;
    }
    if (i >= warmup) times.push_back(s);
  }
  // Forward FLOPs from the layers' own counts; backward does twice the forward's work.
  std::int64_t fwd_per_sample = 0;
  for (const auto& c : m.costs()) fwd_per_sample += c.flops_per_sample;
  double step_flops = 3.0 * double(fwd_per_sample) * batch;
  double ms = 1000 * median(times);
  double gflops = step_flops / (ms / 1000) / 1e9;

  if (json) {
    std::printf("{\"impl\": \"pipeworks\", \"threads\": %d, \"batch\": %d, \"blas_core\": \"%s\", "
                "\"ms_per_step_median\": %.3f, \"ms_per_step_min\": %.3f, \"step_gflop\": %.3f, "
                "\"achieved_gflops\": %.2f, \"sgemm_gflops\": %.2f, \"fraction_of_sgemm\": %.3f}\n",
                threads, batch, blas_core_name().c_str(), ms,
                1000 * *std::min_element(times.begin(), times.end()), step_flops / 1e9, gflops,
                peak, gflops / peak);
  } else {
    std::printf("gpt-small step, batch %d, %d threads, OpenBLAS core %s\n", batch, threads,
                blas_core_name().c_str());
    std::printf("| measure                 | value        |\n|---|---|\n");
    std::printf("| ms per step (median)    | %12.1f |\n", ms);
    std::printf("| GFLOP per step          | %12.2f |\n", step_flops / 1e9);
    std::printf("| achieved GFLOP/s        | %12.2f |\n", gflops);
    std::printf("| sgemm GFLOP/s (n=%d)  | %12.2f |\n", sgemm_n, peak);
    std::printf("| fraction of sgemm rate  | %12.2f |\n", gflops / peak);
  }
  return 0;
}
