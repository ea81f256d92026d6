// CUDA causal attention against the CPU's: the output, the saved probabilities and the gradient
// of qkv (which adds into what is there), by normalised error (<= 1e-5 in fp32), for sequence
// lengths below and above the CPU's row block. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/layers/attention.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "tests/ops/cuda/attention_reference_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA attention matches the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  for (int Tn : {5, 70}) {
    const int B = 2, C = 48, NH = 4;
    const std::size_t nqkv = std::size_t(B) * Tn * 3 * C, nout = std::size_t(B) * Tn * C;
    const std::size_t natt = std::size_t(B) * NH * Tn * Tn;
    const auto qkv = random_floats(nqkv, 12), dy = random_floats(nout, 13);
    std::vector<float> out(nout), att(natt), dqkv(nqkv, 0.5f);
    attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
    attention_backward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
    gpu_buffer<float> gqkv(qkv), gdy(dy), gout(nout), gatt(natt), gscratch(natt);
    gpu_buffer<float> gdqkv(std::vector<float>(nqkv, 0.5f));
    cuda::attention_forward(gout.get(), gatt.get(), gqkv.get(), B, Tn, C, NH);
    cuda::attention_backward(gdqkv.get(), gscratch.get(), gdy.get(), gqkv.get(), gatt.get(), B, Tn,
                             C, NH);
    INFO("T = " << Tn);
    CHECK(normalised_error(gout.download(), out) <= 1e-5);
    CHECK(normalised_error(gatt.download(), att) <= 1e-5);
    CHECK(normalised_error(gdqkv.download(), dqkv) <= 1e-5);
  }
#endif
}
