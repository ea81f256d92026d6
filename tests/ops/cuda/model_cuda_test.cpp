// Whole models on a GPU against the CPU: one microbatch's loss and gradient (gpt and mlp, every
// block through the device ops), and the trainer's steps (clipping and AdamW on the GPU).
// Skipped without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "ops/device/device_context.hpp"
#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "ops/train/trainer.hpp"
#include "tests/ops/cuda/gpu_test_util.hpp"
#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;
using cuda_test::have_gpu;
using cuda_test::normalised_error;

namespace {

std::vector<float> host_values(const param_set& p) {
  const tensor h = p.arena().copy_to(device::cpu());
  return {h.span<float>().begin(), h.span<float>().end()};
}

// Loss and gradient of one microbatch on `dev` (the weights copied there).
std::pair<float, std::vector<float>> loss_and_grad(const device_context& dev, const model<float>& m,
                                                   const param_set& w, const tensor& input,
                                                   const microbatch_ctx& ctx) {
  const param_set here = w.on(dev);
  param_set g = here.zeros_like();
  stage_forward f = forward_blocks(dev, m, here, input.clone(), ctx);
  const float loss = loss_value<float>(f.output);
  backward_blocks(dev, m, here, g, std::move(f.saved), scalar_tensor<float>(1.f), ctx);
  return {loss, host_values(g)};
}

tensor random_images(std::int64_t B, int n, std::uint64_t seed) {
  tensor t({B, n}, dtype::f32);
  const auto v = test::random_values(B * n, seed, -1, 1);
  for (std::int64_t i = 0; i < B * n; ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

}  // namespace

TEST_CASE("a gpt microbatch on the GPU matches the CPU loss and gradient", "[cuda]") {
  if (!have_gpu()) return;
  const gpt_config cfg{64, 2, 4, 64, 256};
  const model<float> m = make_gpt<float>(cfg);
  const param_set w = m.init_params(7);
  const std::int64_t B = 4, Tn = 64;
  const tensor tokens = test::random_tokens(B, Tn, cfg.vocab, 11);
  microbatch_ctx ctx{B, std::make_shared<const tensor>(test::random_tokens(B, Tn, cfg.vocab, 12))};
  const device_context gpu = device_context::cuda(0);
  const auto [cpu_loss, cpu_grad] = loss_and_grad(host_context(), m, w, tokens, ctx);
  const auto [gpu_loss, gpu_grad] = loss_and_grad(gpu, m, w, tokens, ctx);
  CHECK(std::abs(gpu_loss - cpu_loss) <= 1e-5 * std::abs(cpu_loss));
  CHECK(normalised_error(gpu_grad, cpu_grad) <= 1e-5);
}

// With TF32 the GEMMs round their inputs to 10 bits and attention runs on the flash kernels (head
// size 16 here; T 100 leaves the last 64-row tile part full): TF32's error, not fp32's.
TEST_CASE("a gpt microbatch on the GPU with TF32 and flash attention matches the CPU", "[cuda]") {
  if (!have_gpu()) return;
  const gpt_config cfg{128, 2, 4, 64, 256};
  const model<float> m = make_gpt<float>(cfg);
  const param_set w = m.init_params(7);
  const std::int64_t B = 3, Tn = 100;
  const tensor tokens = test::random_tokens(B, Tn, cfg.vocab, 13);
  microbatch_ctx ctx{B, std::make_shared<const tensor>(test::random_tokens(B, Tn, cfg.vocab, 14))};
  const device_context gpu = device_context::cuda(0, gpu_math::tf32);
  const auto [cpu_loss, cpu_grad] = loss_and_grad(host_context(), m, w, tokens, ctx);
  const auto [gpu_loss, gpu_grad] = loss_and_grad(gpu, m, w, tokens, ctx);
  CHECK(std::abs(gpu_loss - cpu_loss) <= 1e-3 * std::abs(cpu_loss));
  CHECK(normalised_error(gpu_grad, cpu_grad) <= 5e-3);
}

// With bf16 the linear layers multiply bf16 operands (fp32 accumulation) and attention runs as with
// TF32: bf16's error (<= 1e-2), fp32 everywhere else.
TEST_CASE("a gpt microbatch on the GPU with bf16 matrix products matches the CPU", "[cuda]") {
  if (!have_gpu()) return;
  const gpt_config cfg{128, 2, 4, 64, 256};
  const model<float> m = make_gpt<float>(cfg);
  const param_set w = m.init_params(7);
  const std::int64_t B = 3, Tn = 100;
  const tensor tokens = test::random_tokens(B, Tn, cfg.vocab, 15);
  microbatch_ctx ctx{B, std::make_shared<const tensor>(test::random_tokens(B, Tn, cfg.vocab, 16))};
  const device_context gpu = device_context::cuda(0, gpu_math::bf16);
  const auto [cpu_loss, cpu_grad] = loss_and_grad(host_context(), m, w, tokens, ctx);
  const auto [gpu_loss, gpu_grad] = loss_and_grad(gpu, m, w, tokens, ctx);
  CHECK(std::abs(gpu_loss - cpu_loss) <= 1e-2 * std::abs(cpu_loss));
  CHECK(normalised_error(gpu_grad, cpu_grad) <= 1e-2);
  // The same again on the GPU: bit for bit (no atomics, the scratch memory reused).
  const auto [again_loss, again_grad] = loss_and_grad(gpu, m, w, tokens, ctx);
  CHECK(again_loss == gpu_loss);
  CHECK(again_grad == gpu_grad);
}

TEST_CASE("an mlp microbatch on the GPU matches the CPU loss and gradient", "[cuda]") {
  if (!have_gpu()) return;
  const model<float> m = make_mlp<float>(mlp_config{});
  const param_set w = m.init_params(3);
  const std::int64_t B = 32;
  tensor labels({B}, dtype::i32);
  for (std::int64_t i = 0; i < B; ++i) labels.data<std::int32_t>()[i] = static_cast<int>(i % 10);
  microbatch_ctx ctx{B, std::make_shared<const tensor>(std::move(labels))};
  const tensor images = random_images(B, 784, 5);
  const device_context gpu = device_context::cuda(0);
  const auto [cpu_loss, cpu_grad] = loss_and_grad(host_context(), m, w, images, ctx);
  const auto [gpu_loss, gpu_grad] = loss_and_grad(gpu, m, w, images, ctx);
  CHECK(std::abs(gpu_loss - cpu_loss) <= 1e-5 * std::abs(cpu_loss));
  CHECK(normalised_error(gpu_grad, cpu_grad) <= 1e-5);
}

TEST_CASE("the trainer on the GPU follows the CPU trainer step by step", "[cuda]") {
  if (!have_gpu()) return;
  const gpt_config cfg{64, 2, 4, 64, 256};
  const model<float> m = make_gpt<float>(cfg);
  train_config tc;
  tc.steps = 5;
  tc.microbatches = 2;
  tc.optim.lr = 1e-3;
  tc.optim.weight_decay = 0.01;
  tc.clip_grad_norm = 1.0;
  const device_context gpu = device_context::cuda(0);
  trainer<float> on_cpu(m, m.init_params(1), tc);
  trainer<float> on_gpu(m, m.init_params(1), tc, gpu);
  REQUIRE(on_gpu.weights()->where() == gpu.where());
  for (int s = 0; s < tc.steps; ++s) {
    auto batch = [&] {
      return minibatch{test::random_tokens(8, 64, 256, 100 + s), test::random_tokens(8, 64, 256, 200 + s)};
    };
    const auto a = on_cpu.step(batch());
    const auto b = on_gpu.step(batch());
    REQUIRE(a);
    REQUIRE(b);
    INFO("step " << s + 1);
    CHECK(std::abs(b->loss - a->loss) <= 1e-5 * std::abs(a->loss));
    CHECK(std::abs(b->grad_norm - a->grad_norm) <= 1e-4 * a->grad_norm);
  }
  CHECK(normalised_error(host_values(*on_gpu.weights()), host_values(*on_cpu.weights())) <= 1e-5);
  // The moments come back to the host for a checkpoint.
  const auto& st = on_gpu.optimizer_state_now();
  REQUIRE(st.size() == on_cpu.optimizer_state_now().size());
  CHECK(st[0].step == 5);
  CHECK(normalised_error(st[0].m, on_cpu.optimizer_state_now()[0].m) <= 1e-4);
}

// bf16 is mixed precision: the weights (the master copy), gradients and AdamW's moments stay
// fp32, only the linear layers' operands are rounded for their products.
TEST_CASE("the trainer with bf16 keeps fp32 weights and follows the CPU trainer", "[cuda]") {
  if (!have_gpu()) return;
  const gpt_config cfg{64, 2, 4, 64, 256};
  const model<float> m = make_gpt<float>(cfg);
  train_config tc;
  tc.steps = 5;
  tc.optim = default_optimizer_config(optimizer_kind::adamw);
  tc.optim.lr = 1e-3;
  tc.clip_grad_norm = 1.0;
  const device_context gpu = device_context::cuda(0, gpu_math::bf16);
  trainer<float> on_cpu(m, m.init_params(1), tc);
  trainer<float> on_gpu(m, m.init_params(1), tc, gpu);
  REQUIRE(on_gpu.weights()->arena().type() == dtype::f32);
  for (int s = 0; s < tc.steps; ++s) {
    auto batch = [&] {
      return minibatch{test::random_tokens(8, 64, 256, 300 + s), test::random_tokens(8, 64, 256, 400 + s)};
    };
    const auto a = on_cpu.step(batch());
    const auto b = on_gpu.step(batch());
    REQUIRE(a);
    REQUIRE(b);
    INFO("step " << s + 1);
    CHECK(std::abs(b->loss - a->loss) <= 1e-2 * std::abs(a->loss));
  }
  CHECK(normalised_error(host_values(*on_gpu.weights()), host_values(*on_cpu.weights())) <= 1e-2);
  CHECK(normalised_error(on_gpu.optimizer_state_now().at(0).m,
                         on_cpu.optimizer_state_now().at(0).m) <= 1e-2);
}

TEST_CASE("a GPU refuses f64 blocks by name", "[cuda]") {
  if (!have_gpu()) return;
  const gpt_config cfg{64, 1, 2, 32, 256};
  const model<double> m = make_gpt<double>(cfg);
  const device_context gpu = device_context::cuda(0);
  const param_set w = m.init_params(1).on(gpu);
  microbatch_ctx ctx{2, nullptr};
  CHECK_THROWS_WITH(forward_blocks(gpu, m, w, test::random_tokens(2, 8, 256, 1), ctx),
                    Catch::Contains("cuda:0 runs f32 only"));
}
