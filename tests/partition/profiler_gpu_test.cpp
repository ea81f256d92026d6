// The profiler on a GPU: the same layers and bytes as on the CPU (the sizes follow from the model,
// not the device), and times of work finished on the GPU. Skipped without a GPU.
#include <catch2/catch.hpp>

#include "ops/device/device_context.hpp"
#include "ops/model/gpt.hpp"
#include "partition/profiler.hpp"
#include "tests/ops/cuda/gpu_test_util.hpp"
#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

TEST_CASE("profile of gpt-tiny on a GPU: the CPU's layers and bytes with GPU times", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  const model<float> net = make_gpt<float>(gpt_tiny());
  const minibatch mb{test::random_tokens(4, 64, 256, 1), test::random_tokens(4, 64, 256, 2)};
  const device_context gpu = device_context::cuda(0);
  auto on_cpu = profile_model(net, mb, {.repeats = 2});
  auto on_gpu = profile_model(net, mb, {.repeats = 2, .device = &gpu});
  REQUIRE(on_cpu.ok());
  REQUIRE(on_gpu.ok());
  REQUIRE(on_gpu->layers.size() == on_cpu->layers.size());
  for (std::size_t i = 0; i < on_cpu->layers.size(); ++i) {
    const layer_profile &c = on_cpu->layers[i], &g = on_gpu->layers[i];
    INFO(c.name);
    CHECK(g.name == c.name);
    CHECK(g.param_bytes == c.param_bytes);
    CHECK(g.saved_bytes == c.saved_bytes);
    CHECK(g.activation_bytes == c.activation_bytes);
    CHECK(g.fwd_ms > 0);
    CHECK(g.bwd_ms > 0);
  }
}
