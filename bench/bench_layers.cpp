// Micro-benchmark: ms per forward and backward of each layer at gpt-small sizes (B=8, T=128,
// C=256, NH=4, V=256), beside the OpenBLAS sgemm rate measured in the same run.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/layers/activation.hpp"
#include "ops/layers/attention.hpp"
#include "ops/layers/cross_entropy.hpp"
#include "ops/layers/embedding.hpp"
#include "ops/layers/layernorm.hpp"
#include "ops/layers/linear.hpp"

using namespace pipeworks;
using clock_type = std::chrono::steady_clock;

namespace {

// Median ms of fn over rounds, each round long enough (about 20 ms) to swamp clock noise.
double time_ms(const std::function<void()>& fn, int rounds) {
  fn();
  auto t0 = clock_type::now();
  fn();
  const double once = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
  const int reps = std::max(1, int(20.0 / std::max(once, 1e-3)));
  std::vector<double> ms;
  for (int r = 0; r < rounds; r++) {
    t0 = clock_type::now();
    for (int i = 0; i < reps; i++) fn();
    ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count() / reps);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// The best square sgemm with OpenBLAS's own threads: the machine's practical fp32 limit.
double sgemm_gflops(int n, int threads) {
  openblas_set_num_threads(threads);
  auto a = random_floats(std::size_t(n) * n, 1), b = random_floats(std::size_t(n) * n, 2);
  std::vector<float> c(std::size_t(n) * n);
  const double ms = time_ms(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                    n, 0.0f, c.data(), n);
      },
      5);
  blas_single_threaded();
  return 2.0 * n * n * n / ms / 1e6;
}

struct row {
  std::string name;
  int per_step;  // times the layer runs in one gpt-small step
  double fwd_ms, bwd_ms;
  double fwd_flops;  // per call
};

}  // namespace

int main(int argc, char** argv) {
  run_with_best_blas_kernels(argv);
  CLI::App app{"bench_layers: ms per forward and backward of each layer at gpt-small sizes"};
  int threads = 2, rounds = 5, B = 8, Tn = 128, C = 256, NH = 4, V = 256, L = 8;
  app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "timed rounds per figure (median)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", B, "B")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  set_cpu_threads(threads);
  const double peak = sgemm_gflops(1024, threads);

  const std::int64_t N = std::int64_t(B) * Tn;
  auto x = random_floats(N * 4 * C, 3), w = random_floats(std::size_t(4) * C * C, 4);
  auto bias = random_floats(4 * C, 5), dy = random_floats(N * 4 * C, 6);
  std::vector<float> out(N * 4 * C), dx(N * 4 * C), dw(std::size_t(4) * C * C), db(4 * C);
  std::vector<float> mean(N), rstd(N), att(std::size_t(B) * NH * Tn * Tn);
  auto wte = random_floats(std::size_t(V) * C, 7), wpe = random_floats(std::size_t(Tn) * C, 8);
  std::vector<float> dwte(wte.size()), dwpe(wpe.size());
  std::vector<std::int32_t> tokens(N);
  for (std::int64_t i = 0; i < N; i++) tokens[i] = std::int32_t((i * 7919) % V);
  std::vector<row> rows;

  auto linear_row = [&](const char* name, int per_step, int c, int oc, bool with_bias,
                        weight_layout layout) {
    const float* b = with_bias ? bias.data() : nullptr;
    rows.push_back(
        {name, per_step,
         time_ms([&] { linear_forward(out.data(), x.data(), w.data(), b, N, c, oc, layout); },
                 rounds),
         time_ms(
             [&] {
               linear_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dy.data(),
                               x.data(), w.data(), N, c, oc, layout);
             },
             rounds),
         2.0 * N * c * oc});
  };
  rows.push_back(
      {"embedding", 1,
       time_ms(
           [&] { embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, Tn, C); },
           rounds),
       time_ms(
           [&] {
             embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), B, Tn, C);
           },
           rounds),
       0});
  rows.push_back({"layernorm", 2 * L + 1,
                  time_ms(
                      [&] {
                        layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                          bias.data(), N, C);
                      },
                      rounds),
                  time_ms(
                      [&] {
                        layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(),
                                           w.data(), mean.data(), rstd.data(), N, C);
                      },
                      rounds),
                  0});
  linear_row("linear c_attn C->3C", L, C, 3 * C, true, weight_layout::in_out);
  rows.push_back(
      {"attention", L,
       time_ms([&] { attention_forward(out.data(), att.data(), x.data(), B, Tn, C, NH); }, rounds),
       time_ms(
           [&] { attention_backward(dx.data(), dy.data(), x.data(), att.data(), B, Tn, C, NH); },
           rounds),
       double(attention_cost(Tn, C, NH, 4).flops_per_sample) * B});
  linear_row("linear c_proj C->C", L, C, C, true, weight_layout::in_out);
  linear_row("linear c_fc C->4C", L, C, 4 * C, true, weight_layout::in_out);
  rows.push_back(
      {"gelu 4C", L, time_ms([&] { gelu_forward(out.data(), x.data(), N * 4 * C); }, rounds),
       time_ms([&] { gelu_backward(dx.data(), dy.data(), x.data(), N * 4 * C); }, rounds), 0});
  linear_row("linear mlp c_proj 4C->C", L, 4 * C, C, true, weight_layout::in_out);
  linear_row("lm_head C->V (out_in)", 1, C, V, false, weight_layout::out_in);
  rows.push_back(
      {"cross_entropy V", 1,
       time_ms([&] { (void)cross_entropy_forward(out.data(), x.data(), tokens.data(), N, V); },
               rounds),
       time_ms([&] { cross_entropy_backward(dx.data(), out.data(), tokens.data(), 1.0f, N, V); },
               rounds),
       0});

  std::printf("bench_layers  B=%d T=%d C=%d NH=%d V=%d  threads=%d  OpenBLAS core %s\n", B, Tn, C,
              NH, V, threads, blas_core_name().c_str());
  std::printf("%-26s %6s %9s %9s %11s %11s\n", "layer", "x/step", "fwd ms", "bwd ms", "fwd GF/s",
              "step ms");
  double step_ms = 0, step_flops = 0;
  for (const row& r : rows) {
    const double total = r.per_step * (r.fwd_ms + r.bwd_ms);
    step_ms += total;
    step_flops += r.per_step * 3 * r.fwd_flops;
    if (r.fwd_flops > 0)
      std::printf("%-26s %6d %9.3f %9.3f %11.1f %11.2f\n", r.name.c_str(), r.per_step, r.fwd_ms,
                  r.bwd_ms, r.fwd_flops / r.fwd_ms / 1e6, total);
    else
      std::printf("%-26s %6d %9.3f %9.3f %11s %11.2f\n", r.name.c_str(), r.per_step, r.fwd_ms,
                  r.bwd_ms, "-", total);
  }
  std::printf(
      "sum over a %d-layer step (no residual adds, no optimizer): %.1f ms, %.1f GFLOP/s "
      "(matmul FLOPs x3)\n",
      L, step_ms, step_flops / step_ms / 1e6);
  std::printf("OpenBLAS sgemm 1024^3, %d threads: %.1f GFLOP/s; step at %.0f%% of it\n", threads,
              peak, 100.0 * step_flops / step_ms / 1e6 / peak);
  return 0;
}
