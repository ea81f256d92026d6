// CUDA softmax cross-entropy against the CPU's: the mean loss, the probabilities and the
// gradient (<= 1e-5 normalised error in fp32), and a target outside the vocabulary named by
// position. Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/layers/cross_entropy.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/cross_entropy_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA cross-entropy matches the CPU loss probabilities and gradient", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  for (int V : {10, 256, 1000}) {
    const std::int64_t N = 129;
    const auto logits = random_floats(N * V, 7, 3.f);
    std::vector<std::int32_t> targets(N);
    for (std::int64_t n = 0; n < N; ++n) targets[n] = static_cast<std::int32_t>((n * 37) % V);
    std::vector<float> probs(N * V), dl(N * V, 0.f);
    const float loss = cross_entropy_forward(probs.data(), logits.data(), targets.data(), N, V);
    cross_entropy_backward(dl.data(), probs.data(), targets.data(), 0.5f, N, V);
    gpu_buffer<float> gl(logits), gp(N * V), grow(N), gdl(N * V);
    gpu_buffer<std::int32_t> gt(targets);
    const float gloss = cuda::cross_entropy_forward(gp.get(), grow.get(), gl.get(), gt.get(), N, V);
    cuda::cross_entropy_backward(gdl.get(), gp.get(), gt.get(), 0.5f, N, V);
    INFO("V = " << V);
    CHECK(std::fabs(gloss - loss) <= 1e-5 * std::fabs(loss));
    CHECK(normalised_error(gp.download(), probs) <= 1e-5);
    CHECK(normalised_error(gdl.download(), dl) <= 1e-5);
    std::vector<std::int32_t> bad = targets;
    bad[17] = V;
    gpu_buffer<std::int32_t> gbad(bad);
    CHECK_THROWS_WITH(cuda::cross_entropy_forward(gp.get(), grow.get(), gl.get(), gbad.get(), N, V),
                      Catch::Contains("position 17"));
  }
#endif
}
