// The CUDA SGD kernel against the CPU's sgd_update over several steps, by normalised error
// (<= 1e-5 in fp32), weights and velocity. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/optim/optimizer.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/sgd_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("the CUDA SGD kernel matches the CPU update", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  const std::size_t n = 10007;
  auto w = random_floats(n, 19);
  std::vector<float> v(n, 0.f);
  gpu_buffer<float> gw(w), gv(v), gg(n);
  for (int step = 0; step < 4; ++step) {
    const auto g = random_floats(n, 20 + static_cast<std::uint32_t>(step));
    sgd_update<float>(w, w, g, v, 0.1, 0.9, 1e-4);
    gpu_buffer<float> gstep(g);
    cuda::sgd_update(gw.get(), gw.get(), gstep.get(), gv.get(), n, 0.1, 0.9, 1e-4);
  }
  CHECK(normalised_error(gw.download(), w) <= 1e-5);
  CHECK(normalised_error(gv.download(), v) <= 1e-5);
#endif
}
