// Attention on cuBLAS GEMMs against the CPU's: output, probabilities and the qkv gradient (which
// adds into what is there) by normalised error, <= 1e-5 in strict fp32 and <= 2e-3 with TF32, for
// sequence lengths from a few to several hundred; outputs start as NaN so every element must be
// written. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>

#include "gpu_test_util.hpp"
#include "ops/layers/attention.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/attention_gemm_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("attention on cuBLAS matches the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  for (bool tf32 : {false, true})
    for (int Tn : {5, 70, 300}) {
      const int B = 3, C = 96, NH = 6;
      const std::size_t nqkv = std::size_t(B) * Tn * 3 * C, nout = std::size_t(B) * Tn * C;
      const std::size_t natt = std::size_t(B) * NH * Tn * Tn;
      const auto qkv = random_floats(nqkv, 20 + Tn), dy = random_floats(nout, 40 + Tn);
      std::vector<float> out(nout), att(natt), dqkv(nqkv, 0.5f);
      attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
      attention_backward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
      const std::vector<float> nan_out(nout, NAN), nan_att(natt, NAN);
      gpu_buffer<float> gqkv(qkv), gdy(dy), gout(nan_out), gatt(nan_att), gscratch(nan_att);
      gpu_buffer<float> gdqkv(std::vector<float>(nqkv, 0.5f));
      const cuda::blas_handle blas(nullptr, tf32 ? gpu_math::tf32 : gpu_math::fp32);
      cuda::attention_forward(blas, gout.get(), gatt.get(), gqkv.get(), B, Tn, C, NH);
      cuda::attention_backward(blas, gdqkv.get(), gscratch.get(), gdy.get(), gqkv.get(), gatt.get(),
                               B, Tn, C, NH);
      INFO("T = " << Tn << (tf32 ? ", TF32" : ", fp32"));
      const double bound = tf32 ? 2e-3 : 1e-5;
      CHECK(normalised_error(gout.download(), out) <= bound);
      CHECK(normalised_error(gatt.download(), att) <= bound);
      CHECK(normalised_error(gdqkv.download(), dqkv) <= bound);
    }
#endif
}
