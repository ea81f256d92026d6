// CUDA GELU against the CPU's, forward and backward (which adds into dinp), by normalised error
// (<= 1e-5 in fp32), over inputs that reach both tails. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/layers/activation.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/activation_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA GELU matches the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  const std::int64_t n = 100003;
  const auto x = random_floats(n, 5, 4.f), dy = random_floats(n, 6);
  std::vector<float> out(n), dx(n, 0.125f);
  gelu_forward(out.data(), x.data(), n);
  gelu_backward(dx.data(), dy.data(), x.data(), n);
  gpu_buffer<float> gx(x), gdy(dy), gout(n), gdx(std::vector<float>(n, 0.125f));
  cuda::gelu_forward(gout.get(), gx.get(), n);
  cuda::gelu_backward(gdx.get(), gdy.get(), gx.get(), n);
  CHECK(normalised_error(gout.download(), out) <= 1e-5);
  CHECK(normalised_error(gdx.download(), dx) <= 1e-5);
#endif
}
