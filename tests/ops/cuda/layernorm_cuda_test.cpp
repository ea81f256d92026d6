// CUDA layer normalisation against the CPU's, forward and backward, by normalised error
// (<= 1e-5 in fp32), at widths below, at and above a warp. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/layers/layernorm.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/layernorm_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA layernorm matches the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  for (int C : {7, 32, 768}) {
    const std::int64_t N = 257;
    const auto x = random_floats(N * C, 1), w = random_floats(C, 2), b = random_floats(C, 3);
    const auto dy = random_floats(N * C, 4);
    std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.5f), dw(C, 0.25f), db(C, 0.f);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), N, C);
    gpu_buffer<float> gx(x), gw(w), gb(b), gdy(dy), gout(out.size()), gmean(N), grstd(N);
    gpu_buffer<float> gdx(std::vector<float>(N * C, 0.5f)), gdw(std::vector<float>(C, 0.25f)), gdb(C);
    cuda::layernorm_forward(gout.get(), gmean.get(), grstd.get(), gx.get(), gw.get(), gb.get(), N, C);
    cuda::layernorm_backward(gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(),
                             gmean.get(), grstd.get(), N, C);
    INFO("C = " << C);
    CHECK(normalised_error(gout.download(), out) <= 1e-5);
    CHECK(normalised_error(grstd.download(), rstd) <= 1e-5);
    CHECK(normalised_error(gdx.download(), dx) <= 1e-5);
    CHECK(normalised_error(gdw.download(), dw) <= 1e-5);
    CHECK(normalised_error(gdb.download(), db) <= 1e-5);
  }
#endif
}
