// cuBLAS linear layers against the CPU's in both weight layouts: the output and every gradient
// (which add into what is there), by normalised error (<= 1e-5 in strict fp32). Skips without a
// GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
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
  for (weight_layout layout : {weight_layout::in_out, weight_layout::out_in}) {
    const std::int64_t N = 67;
    const int C = 48, OC = 80;
    const auto x = random_floats(N * C, 8), w = random_floats(std::size_t(C) * OC, 9, 0.1f);
    const auto b = random_floats(OC, 10), dy = random_floats(N * OC, 11);
    std::vector<float> out(N * OC), dx(N * C, 0.5f), dw(std::size_t(C) * OC, 0.25f), db(OC, 1.f);
    linear_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC, layout);
    linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC, layout);
    gpu_buffer<float> gx(x), gw(w), gb(b), gdy(dy), gout(out.size());
    gpu_buffer<float> gdx(std::vector<float>(N * C, 0.5f)), gdw(std::vector<float>(w.size(), 0.25f));
    gpu_buffer<float> gdb(std::vector<float>(OC, 1.f));
    cuda::linear_forward(blas, gout.get(), gx.get(), gw.get(), gb.get(), N, C, OC, layout);
    cuda::linear_backward(blas, gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), N, C,
                          OC, layout);
    INFO((layout == weight_layout::in_out ? "in_out" : "out_in"));
    CHECK(normalised_error(gout.download(), out) <= 1e-5);
    CHECK(normalised_error(gdx.download(), dx) <= 1e-5);
    CHECK(normalised_error(gdw.download(), dw) <= 1e-5);
    CHECK(normalised_error(gdb.download(), db) <= 1e-5);
  }
#endif
}
