// cuBLAS linear layers against the CPU's in both weight layouts, the output and every gradient
// (which add into what is there): <= 1e-5 in fp32, and bf16 against the CPU on rounded operands;
// the input gradient through a GELU in one GEMM against the CPU's two kernels.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "ops/layers/activation.hpp"
#include "ops/layers/linear.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/linear_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA linear layers match the CPU in both weight layouts", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  cuda::blas_handle blas;
  // A bias aligned to 16 bytes goes into cuBLASLt's epilogue; one that is not, through the kernel.
  for (const int bias_at : {0, 1})
  for (weight_layout layout : {weight_layout::in_out, weight_layout::out_in}) {
    const std::int64_t N = 67;
    const int C = 48, OC = 80;
    const auto x = random_floats(N * C, 8), w = random_floats(std::size_t(C) * OC, 9, 0.1f);
    const auto b = random_floats(OC, 10), dy = random_floats(N * OC, 11);
    std::vector<float> out(N * OC), dx(N * C, 0.5f), dw(std::size_t(C) * OC, 0.25f), db(OC, 1.f);
    linear_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC, layout);
    linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC, layout);
    gpu_buffer<float> gx(x), gw(w), gdy(dy), gout(out.size());
    gpu_buffer<float> gdx(std::vector<float>(N * C, 0.5f)), gdw(std::vector<float>(w.size(), 0.25f));
    gpu_buffer<float> gdb(std::vector<float>(OC, 1.f));
    std::vector<float> shifted(bias_at, 7.f);
    shifted.insert(shifted.end(), b.begin(), b.end());
    gpu_buffer<float> gbias(shifted);
    cuda::linear_forward(blas, gout.get(), gx.get(), gw.get(), gbias.get() + bias_at, N, C, OC, layout);
    cuda::linear_backward(blas, gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), N, C,
                          OC, layout);
    INFO((layout == weight_layout::in_out ? "in_out" : "out_in") << ", bias at " << bias_at);
    CHECK(normalised_error(gout.download(), out) <= 1e-5);
    CHECK(normalised_error(gdx.download(), dx) <= 1e-5);
    CHECK(normalised_error(gdw.download(), dw) <= 1e-5);
    CHECK(normalised_error(gdb.download(), db) <= 1e-5);
  }
#endif
}

TEST_CASE("the BGRAD epilogues give the bias gradient with the weight gradient", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  // GPT-2's shapes in small: every linear of a block has a weight and a bias gradient; the fused
  // GEMM must be what runs (the test would otherwise check the column sums again).
  for (const gpu_math math : {gpu_math::fp32, gpu_math::tf32})
  for (weight_layout layout : {weight_layout::in_out, weight_layout::out_in}) {
    cuda::blas_handle blas(nullptr, math);
    const std::int64_t N = 128;
    const int C = 64, OC = 192;
    const auto x = random_floats(N * C, 15), dy = random_floats(N * OC, 16);
    std::vector<float> dw(std::size_t(C) * OC, 0.25f), db(OC, 1.f);
    linear_backward<float>(nullptr, dw.data(), db.data(), dy.data(), x.data(), nullptr, N, C, OC,
                           layout);
    gpu_buffer<float> gx(x), gdy(dy), gdw(std::vector<float>(dw.size(), 0.25f));
    gpu_buffer<float> gdb(std::vector<float>(OC, 1.f)), sums(std::vector<float>(OC, 1e30f));
    gpu_buffer<float> gdw2(std::vector<float>(dw.size(), 0.25f));
    const bool in_out = layout == weight_layout::in_out;
    INFO((in_out ? "in_out" : "out_in") << (math == gpu_math::tf32 ? ", TF32" : ", fp32"));
    const bool fused =
        in_out ? blas.lt().gemm_bgrad(math, true, OC, C, static_cast<int>(N), gdy.get(), OC,
                                      gx.get(), C, gdw2.get(), OC, sums.get())
               : blas.lt().gemm_bgrad(math, false, C, OC, static_cast<int>(N), gx.get(), C,
                                      gdy.get(), OC, gdw2.get(), C, sums.get());
    REQUIRE(fused);
    cuda::linear_backward(blas, nullptr, gdw.get(), gdb.get(), gdy.get(), gx.get(), nullptr, N, C,
                          OC, layout);
    // TF32's rounding of the operands may reach the epilogue's sums too.
    const double tol = math == gpu_math::fp32 ? 1e-5 : 2e-3;
    CHECK(normalised_error(gdw.download(), dw) <= tol);
    CHECK(normalised_error(gdw2.download(), dw) <= tol);
    CHECK(normalised_error(gdb.download(), db) <= tol);  // added onto its 1s
    std::vector<float> col(OC, 0.f);
    for (std::int64_t i = 0; i < N; ++i)
      for (int j = 0; j < OC; ++j) col[j] += dy[std::size_t(i) * OC + j];
    CHECK(normalised_error(sums.download(), col) <= tol);  // written whole
  }
#endif
}

TEST_CASE("the DGELU epilogue takes a linear layer's input gradient back through GELU", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  cuda::blas_handle blas;
  // GPT's mlp.c_proj: input 4C (GELU's output), output C; GELU's input spans both tails.
  for (weight_layout layout : {weight_layout::in_out, weight_layout::out_in}) {
    const std::int64_t N = 96;
    const int C = 256, OC = 64;
    const auto pre = random_floats(N * C, 12, 3.f), w = random_floats(std::size_t(C) * OC, 13, 0.1f);
    const auto dy = random_floats(N * OC, 14);
    std::vector<float> dgelu(N * C, 0.f), want(N * C, 0.f);
    linear_backward<float>(dgelu.data(), nullptr, nullptr, dy.data(), nullptr, w.data(), N, C, OC,
                           layout);
    gelu_backward(want.data(), dgelu.data(), pre.data(), N * C);
    gpu_buffer<float> gpre(pre), gw(w), gdy(dy), gout(std::vector<float>(N * C, 1e30f));  // poisoned
    INFO((layout == weight_layout::in_out ? "in_out" : "out_in"));
    // The fused GEMM must be there for this shape on a current GPU: false would mean the two
    // kernels run, and this test would say nothing of the epilogue.
    REQUIRE(cuda::linear_backward_gelu(blas, gout.get(), gdy.get(), gw.get(), gpre.get(), N, C, OC,
                                       layout));
    CHECK(normalised_error(gout.download(), want) <= 1e-5);
  }
#endif
}

namespace {
// x rounded to bf16 (nearest even), back in an f32: what the GPU multiplies under --bf16.
std::vector<float> bf16_rounded(std::vector<float> x) {
  for (float& f : x) {
    std::uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&f, &u, 4);
  }
  return x;
}
}  // namespace

// With bf16 the products take bf16 copies of their operands and accumulate in fp32: against the
// CPU on the same rounded operands the error is fp32's, against the CPU in fp32 it is bf16's
// (<= 1e-2) and not fp32's (the rounding did happen). Bias and its gradient stay fp32.
TEST_CASE("CUDA linear layers in bf16 multiply rounded operands with fp32 accumulation", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  cuda::blas_handle blas(nullptr, gpu_math::bf16);
  for (weight_layout layout : {weight_layout::in_out, weight_layout::out_in}) {
    const std::int64_t N = 301;
    const int C = 96, OC = 130;  // N * C and the others: not multiples of 4 everywhere
    const auto x = random_floats(N * C, 18), w = random_floats(std::size_t(C) * OC, 19, 0.1f);
    const auto b = random_floats(OC, 20), dy = random_floats(N * OC, 21);
    struct result {
      std::vector<float> out, dx, dw, db;
    };
    auto cpu = [&](const std::vector<float>& xs, const std::vector<float>& ws,
                   const std::vector<float>& dys) {
      result r{std::vector<float>(N * OC), std::vector<float>(N * C, 0.5f),
               std::vector<float>(w.size(), 0.25f), std::vector<float>(OC, 1.f)};
      linear_forward(r.out.data(), xs.data(), ws.data(), b.data(), N, C, OC, layout);
      linear_backward(r.dx.data(), r.dw.data(), r.db.data(), dys.data(), xs.data(), ws.data(), N,
                      C, OC, layout);
      return r;
    };
    const result exact = cpu(x, w, dy);
    const result rounded = cpu(bf16_rounded(x), bf16_rounded(w), bf16_rounded(dy));
    gpu_buffer<float> gx(x), gw(w), gb(b), gdy(dy), gout(std::size_t(N) * OC);
    gpu_buffer<float> gdx(std::vector<float>(N * C, 0.5f)), gdw(std::vector<float>(w.size(), 0.25f));
    gpu_buffer<float> gdb(std::vector<float>(OC, 1.f));
    cuda::linear_forward(blas, gout.get(), gx.get(), gw.get(), gb.get(), N, C, OC, layout);
    cuda::linear_backward(blas, gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), N, C,
                          OC, layout);
    INFO((layout == weight_layout::in_out ? "in_out" : "out_in"));
    const std::vector<float> out = gout.download(), dx = gdx.download(), dw = gdw.download();
    CHECK(normalised_error(out, rounded.out) <= 1e-5);
    CHECK(normalised_error(dx, rounded.dx) <= 1e-5);
    CHECK(normalised_error(dw, rounded.dw) <= 1e-5);
    CHECK(normalised_error(gdb.download(), exact.db) <= 1e-5);
    for (const auto& [got, want] : {std::pair{&out, &exact.out}, {&dx, &exact.dx}, {&dw, &exact.dw}}) {
      CHECK(normalised_error(*got, *want) <= 1e-2);
      CHECK(normalised_error(*got, *want) > 1e-5);
    }
  }
#endif
}
