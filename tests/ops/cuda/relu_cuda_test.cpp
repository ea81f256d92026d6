// CUDA ReLU against the CPU's, forward and backward (which adds into dinp): equal, since both
// only select. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/layers/activation.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/activation_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA ReLU matches the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  const std::int64_t n = 4099;
  const auto x = random_floats(n, 17), dy = random_floats(n, 18);
  std::vector<float> out(n), dx(n, 0.5f);
  relu_forward(out.data(), x.data(), n);
  relu_backward(dx.data(), dy.data(), x.data(), n);
  gpu_buffer<float> gx(x), gdy(dy), gout(n), gdx(std::vector<float>(n, 0.5f));
  cuda::relu_forward(gout.get(), gx.get(), n);
  cuda::relu_backward(gdx.get(), gdy.get(), gx.get(), n);
  CHECK(gout.download() == out);
  CHECK(normalised_error(gdx.download(), dx) == 0.0);
#endif
}
