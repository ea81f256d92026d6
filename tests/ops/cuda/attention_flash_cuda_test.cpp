// The flash attention kernels against the CPU's attention: output, each row's logsumexp and the
// qkv gradient (which adds into what is there) by normalised error <= 2e-3 (TF32, as the cuBLAS
// attention under TF32), for head sizes 16 to 128 and lengths that do and do not fill their 64-row
// tiles, on the fastest kernels (register-resident for heads of 32 and 64) and the WMMA ones;
// outputs start as NaN, and backward repeats bit for bit. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>

#include "gpu_test_util.hpp"
#include "ops/device/device_ops.hpp"
#include "ops/layers/attention.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/attention_flash_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

namespace {

// Each row's logsumexp of its scaled causal scores, in double, from qkv (B, T, 3C).
std::vector<double> reference_lse(const std::vector<float>& qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> lse(static_cast<std::size_t>(B) * NH * Tn);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < Tn; ++t) {
        std::vector<double> s(t + 1);
        double m = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int x = 0; x < hs; ++x)
            dot += static_cast<double>(qkv[(std::size_t(b) * Tn + t) * 3 * C + h * hs + x]) *
                   qkv[(std::size_t(b) * Tn + j) * 3 * C + C + h * hs + x];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (double v : s) sum += std::exp(v - m);
        lse[(std::size_t(b) * NH + h) * Tn + t] = m + std::log(sum);
      }
  return lse;
}

}  // namespace

TEST_CASE("flash attention matches the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  struct shape {
    int C, NH;
  };
  for (const auto kernels : {cuda::flash_kernels::fastest, cuda::flash_kernels::wmma})
  for (shape sh : {shape{96, 6}, shape{128, 4}, shape{256, 4}, shape{256, 2}})
    for (int Tn : {5, 64, 70, 300}) {
      const int B = 2, C = sh.C, NH = sh.NH;
      INFO("head size " << C / NH << ", T = " << Tn
                        << (kernels == cuda::flash_kernels::wmma ? ", WMMA" : ", fastest"));
      if (!cuda::flash_attention_supported(C / NH, B * NH)) {
        WARN("head size " << C / NH << " is not taken on this GPU");
        continue;
      }
      const std::size_t nqkv = std::size_t(B) * Tn * 3 * C, nout = std::size_t(B) * Tn * C;
      const std::size_t natt = std::size_t(B) * NH * Tn * Tn, nlse = std::size_t(B) * NH * Tn;
      const auto qkv = random_floats(nqkv, 7 + Tn + C), dy = random_floats(nout, 9 + Tn + NH);
      std::vector<float> out(nout), att(natt), dqkv(nqkv, 0.5f);
      attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
      attention_backward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
      gpu_buffer<float> gqkv(qkv), gdy(dy), gout(std::vector<float>(nout, NAN));
      gpu_buffer<float> glse(std::vector<float>(nlse, NAN)), gdelta(std::vector<float>(nlse, NAN));
      gpu_buffer<float> gdqkv(std::vector<float>(nqkv, 0.5f)), again(std::vector<float>(nqkv, 0.5f));
      cuda::flash_attention_forward(nullptr, gout.get(), glse.get(), gqkv.get(), B, Tn, C, NH,
                                    kernels);
      cuda::flash_attention_backward(nullptr, gdqkv.get(), gdelta.get(), gdy.get(), gout.get(),
                                     gqkv.get(), glse.get(), B, Tn, C, NH, kernels);
      cuda::flash_attention_backward(nullptr, again.get(), gdelta.get(), gdy.get(), gout.get(),
                                     gqkv.get(), glse.get(), B, Tn, C, NH, kernels);
      CHECK(normalised_error(gout.download(), out) <= 2e-3);
      CHECK(normalised_error(glse.download(), reference_lse(qkv, B, Tn, C, NH)) <= 2e-3);
      const auto g = gdqkv.download();
      CHECK(normalised_error(g, dqkv) <= 2e-3);
      CHECK(g == again.download());
    }
#endif
}

TEST_CASE("a GPU rank with TF32 saves a logsumexp per row for attention and not the T x T matrix",
          "[cuda]") {
  if (!have_gpu()) return;
  const int B = 2, Tn = 100, C = 128, NH = 4;
  CHECK(attention_saved_shape(host_context(), B, Tn, C, NH) == shape_t{B, NH, Tn, Tn});
  CHECK(attention_saved_shape(device_context::cuda(0, gpu_math::fp32), B, Tn, C, NH) ==
        shape_t{B, NH, Tn, Tn});
  CHECK(attention_saved_shape(device_context::cuda(0, gpu_math::tf32), B, Tn, C, NH) == shape_t{B, NH, Tn});
  // A head size the kernels do not take keeps the materialised probabilities, and so do more
  // heads (batch x heads) than a grid's 65535.
  CHECK(attention_saved_shape(device_context::cuda(0, gpu_math::tf32), B, Tn, 120, 4) ==
        shape_t{B, NH, Tn, Tn});
  CHECK(attention_saved_shape(device_context::cuda(0, gpu_math::tf32), 20000, Tn, C, NH) ==
        shape_t{20000, NH, Tn, Tn});
}
