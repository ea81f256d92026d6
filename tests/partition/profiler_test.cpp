// The profiler: one entry per block, real shapes (each block runs on its predecessor's output),
// bytes that follow from the model's sizes, and positive times.
#include "partition/profiler.hpp"

#include <catch2/catch.hpp>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"

using namespace pipeworks;

TEST_CASE("profile of an mlp: bytes from the layer sizes and positive times", "[partition]") {
  model<float> net = make_mlp<float>(mlp_config{12, {16, 8}, 4});
  minibatch mb{tensor({4, 12}, dtype::f32), tensor({4}, dtype::i32)};
  for (int i = 0; i < 4; ++i) mb.targets.data<std::int32_t>()[i] = i % 4;
  auto p = profile_model(net, mb, {.repeats = 3, .optimizer = optimizer_kind::adamw});
  REQUIRE(p.ok());
  REQUIRE(p->layers.size() == 3);
  CHECK(p->microbatch == 4);
  CHECK(p->layers[0].name == "fc1");
  CHECK(p->layers[0].param_bytes == (12 * 16 + 16) * 4);
  CHECK(p->layers[0].optimizer_bytes == 2 * p->layers[0].param_bytes);
  CHECK(p->layers[0].activation_bytes == 4 * 16 * 4);
  CHECK(p->layers[1].activation_bytes == 4 * 8 * 4);
  CHECK(p->layers[2].param_bytes == (8 * 4 + 4) * 4);
  for (const auto& l : p->layers) {
    CHECK(l.fwd_ms >= 0);
    CHECK(l.bwd_ms >= 0);
    CHECK(l.saved_bytes > 0);
  }
  auto sgd = profile_model(net, mb, {.repeats = 1, .optimizer = optimizer_kind::sgd});
  REQUIRE(sgd.ok());
  CHECK(sgd->layers[0].optimizer_bytes == sgd->layers[0].param_bytes);
}

TEST_CASE("profile of gpt-tiny: a transformer block's output is B x T x C floats", "[partition]") {
  const gpt_config c = gpt_tiny();
  model<float> net = make_gpt<float>(c);
  minibatch mb{tensor({2, c.context}, dtype::i32), tensor({2, c.context}, dtype::i32)};
  for (int i = 0; i < 2 * c.context; ++i) {
    mb.inputs.data<std::int32_t>()[i] = 65 + i % 26;
    mb.targets.data<std::int32_t>()[i] = 65 + (i + 1) % 26;
  }
  auto p = profile_model(net, mb, {.repeats = 2});
  REQUIRE(p.ok());
  REQUIRE(static_cast<int>(p->layers.size()) == net.size());
  CHECK(p->layers[1].activation_bytes == std::int64_t{2} * c.context * c.width * 4);
  CHECK(p->layers[1].fwd_ms > 0);
  CHECK(p->layers[1].bwd_ms > 0);
  CHECK(p->layers.back().activation_bytes == 4);  // the loss
}
