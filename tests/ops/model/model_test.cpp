// Tests for model<T> and the stage loops: cutting a model into stages gives the same init,
// outputs and gradients as running it whole, and costs add up.
#include <catch2/catch.hpp>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

TEST_CASE("init does not depend on how the model is split", "[ops]") {
  model<float> m = make_gpt<float>(gpt_tiny());
  param_set whole = m.init_params(5);
  param_set tail = m.init_params(5, 2, m.size());
  REQUIRE(tail.first_block() == 2);
  for (const auto& e : tail.entries()) {
    INFO(e.name);
    auto a = tail.values<float>(e);
    auto b = whole.values<float>(*whole.find(e.name));
    REQUIRE(std::equal(a.begin(), a.end(), b.begin()));
  }
}

TEST_CASE("two stages give the same loss and gradients as the whole model", "[ops]") {
  model<float> m = make_gpt<float>(gpt_tiny());
  const std::uint64_t seed = 8;
  param_set whole = m.init_params(seed);
  param_set s0 = m.init_params(seed, 0, 2), s1 = m.init_params(seed, 2, m.size());
  tensor tokens = test::random_tokens(3, 64, 256, 1);
  auto targets = std::make_shared<const tensor>(test::random_tokens(3, 64, 256, 2));
  microbatch_ctx ctx{3, targets};

  param_set g = whole.zeros_like();
  stage_forward f = forward_blocks(m, whole, tokens.clone(), ctx);
  const float loss = loss_value<float>(f.output);
  tensor none = backward_blocks(m, whole, g, std::move(f.saved), scalar_tensor(1.0f), ctx);
  REQUIRE(none.empty());

  param_set g0 = s0.zeros_like(), g1 = s1.zeros_like();
  stage_forward f0 = forward_blocks(m, s0, tokens.clone(), ctx);
  REQUIRE(f0.output.shape() == shape_t{3, 64, 64});
  stage_forward f1 = forward_blocks(m, s1, std::move(f0.output), ctx);
  REQUIRE(loss_value<float>(f1.output) == loss);
  tensor d1 = backward_blocks(m, s1, g1, std::move(f1.saved), scalar_tensor(1.0f), ctx);
  REQUIRE(d1.shape() == shape_t{3, 64, 64});
  backward_blocks(m, s0, g0, std::move(f0.saved), std::move(d1), ctx);
  for (const param_set* part : {&g0, &g1})
    for (const auto& e : part->entries()) {
      INFO(e.name);
      auto a = part->values<float>(e);
      auto b = g.values<float>(*g.find(e.name));
      REQUIRE(std::equal(a.begin(), a.end(), b.begin()));
    }
}

TEST_CASE("backward adds into the gradient buffer", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 4, .hidden = {3}, .classes = 2});
  param_set p = m.init_params(1);
  tensor x({2, 4}, dtype::f64);
  for (int i = 0; i < 8; ++i) x.data<double>()[i] = 0.1 * i - 0.3;
  auto t = std::make_shared<tensor>(shape_t{2}, dtype::i32);
  t->data<std::int32_t>()[1] = 1;
  microbatch_ctx ctx{2, t};
  param_set once = test::model_grad(m, p, x, ctx);
  param_set twice = p.zeros_like();
  for (int k = 0; k < 2; ++k) {
    stage_forward f = forward_blocks(m, p, x.clone(), ctx);
    backward_blocks(m, p, twice, std::move(f.saved), scalar_tensor(1.0), ctx);
  }
  for (std::int64_t i = 0; i < p.size(); ++i)
    REQUIRE(twice.values<double>()[i] == Approx(2 * once.values<double>()[i]));
}

TEST_CASE("block costs add up to the model's parameters", "[ops]") {
  model<float> m = make_gpt<float>(gpt_small());
  std::int64_t bytes = 0;
  for (const auto& c : m.costs()) {
    REQUIRE(c.flops_per_sample > 0);
    REQUIRE(c.output_bytes_per_sample > 0);
    bytes += c.param_bytes;
  }
  REQUIRE(bytes == m.param_count() * 4);
  REQUIRE(m.costs()[1].output_bytes_per_sample == 128 * 256 * 4);
}

TEST_CASE("a bad block range is an error", "[ops]") {
  model<float> m = make_mlp<float>({});
  REQUIRE_THROWS_WITH(m.make_params(2, 5), Catch::Contains("[2, 5)"));
}
