// Benchmark: causal attention forward and backward on a GPU, the flash kernels against cuBLAS GEMMs
// around a materialised T x T softmax (both on TF32 tensor cores), at gpt-small's and GPT-2-124M's
// shapes (batch 8); prints a table. Medians of --reps timed calls, each waited for.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "base/result.hpp"
#include "ops/device/device_context.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/attention_flash_cuda.hpp"
#include "ops/cuda/attention_gemm_cuda.hpp"
#include "ops/cuda/gpu_resources.hpp"
#endif

using namespace pipeworks;

namespace {

#ifdef PIPEWORKS_HAVE_CUDA
struct shape {
  const char* name;
  int B, T, C, NH;
};

// Median milliseconds of `reps` calls of f, each waited for on the GPU, after 3 untimed.
double median_ms(const gpu_resources& g, int reps, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  g.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    g.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

tensor random_on(const device_context& d, shape_t sh, std::uint32_t seed) {
  tensor h(sh, dtype::f32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  for (float& x : h.span<float>()) x = n(rng);
  return d.adopt(std::move(h));
}

void run(int reps) {
  const device_context d = device_context::cuda(0, gpu_math::tf32);
  const gpu_resources& g = *d.gpu();
  std::printf("causal attention on GPU %d, TF32, medians of %d calls\n\n", g.index(), reps);
  std::printf("| shape | GEMMs fwd ms | WMMA flash fwd ms | flash fwd ms | GEMMs bwd ms | WMMA flash "
              "bwd ms | flash bwd ms | flash / GEMMs fwd | flash / GEMMs bwd | flash TFLOP/s (causal "
              "half) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const shape s : {shape{"gpt-small", 8, 128, 256, 4}, shape{"gpt2-124m", 8, 1024, 768, 12}}) {
    const int B = s.B, T = s.T, C = s.C, NH = s.NH;
    const tensor qkv = random_on(d, {B, T, 3 * C}, 1), dout = random_on(d, {B, T, C}, 2);
    tensor out = d.uninitialized({B, T, C}, dtype::f32), dqkv = d.zeros({B, T, 3 * C}, dtype::f32);
    tensor att = d.uninitialized({B, NH, T, T}, dtype::f32), scratch = att.uninitialized_like();
    tensor lse = d.uninitialized({B, NH, T}, dtype::f32), delta = lse.uninitialized_like();
    const float* q = qkv.data<float>();
    const double gf = median_ms(g, reps, [&] {
      cuda::attention_forward(g.blas(), out.data<float>(), att.data<float>(), q, B, T, C, NH);
    });
    const double gb = median_ms(g, reps, [&] {
      cuda::attention_backward(g.blas(), dqkv.data<float>(), scratch.data<float>(),
                               dout.data<float>(), q, att.data<float>(), B, T, C, NH);
    });
    auto flash_fwd = [&](cuda::flash_kernels k) {
      return median_ms(g, reps, [&] {
        cuda::flash_attention_forward(g.stream(), out.data<float>(), lse.data<float>(), q, B, T, C,
                                      NH, k);
      });
    };
    auto flash_bwd = [&](cuda::flash_kernels k) {
      return median_ms(g, reps, [&] {
        cuda::flash_attention_backward(g.stream(), dqkv.data<float>(), delta.data<float>(),
                                       dout.data<float>(), out.data<float>(), q, lse.data<float>(),
                                       B, T, C, NH, k);
      });
    };
    const double wf = flash_fwd(cuda::flash_kernels::wmma), wb = flash_bwd(cuda::flash_kernels::wmma);
    const double ff = flash_fwd(cuda::flash_kernels::fastest);
    const double fb = flash_bwd(cuda::flash_kernels::fastest);
    // Useful FLOPs: the causal half of 2 products forward and 5 backward (B NH T^2 hs each, x2).
    const double flop = 2.0 * B * NH * double(T) * T * (C / NH) * 7 / 2;
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.1f |\n", s.name,
                gf, wf, ff, gb, wb, fb, ff / gf, fb / gb, flop / ((ff + fb) * 1e-3) / 1e12);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_attention_gpu: flash attention against cuBLAS attention on a GPU"};
  int reps = 20;
  app.add_option("--reps", reps, "timed calls per figure")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
#ifdef PIPEWORKS_HAVE_CUDA
  try {
    run(reps);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention_gpu: %s\n", e.what());
    return 1;
  }
#else
  std::fprintf(stderr, "bench_attention_gpu: built without CUDA: configure where the toolkit is\n");
  return 1;
#endif
}
