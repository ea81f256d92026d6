// Tests for the mlp: block structure, nn.Linear names and layout, whole-model gradient check in
// double, and logits without targets.
#include "ops/model/mlp.hpp"

#include <catch2/catch.hpp>

#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

TEST_CASE("mlp has one block per linear, nn.Linear names and (out, in) shapes", "[ops]") {
  model<float> m = make_mlp<float>({});
  REQUIRE(m.size() == 3);
  REQUIRE(m.at(2).is_loss());
  param_set p = m.make_params();
  REQUIRE(p.find("fc1.weight")->shape == shape_t{256, 784});
  REQUIRE(p.find("fc1.bias")->shape == shape_t{256});
  REQUIRE(p.find("fc3.weight")->shape == shape_t{10, 128});
  REQUIRE(m.param_count() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  auto costs = m.costs();
  REQUIRE(costs[0].param_bytes == (784 * 256 + 256) * 4);
  REQUIRE(costs[0].flops_per_sample >= 2 * 784 * 256);
  REQUIRE(costs[0].output_bytes_per_sample == 256 * 4);
}

TEST_CASE("mlp init is nn.Linear's uniform bound and deterministic", "[ops]") {
  model<float> m = make_mlp<float>({});
  param_set a = m.init_params(7), b = m.init_params(7), c = m.init_params(8);
  REQUIRE(
      std::equal(a.values<float>().begin(), a.values<float>().end(), b.values<float>().begin()));
  REQUIRE_FALSE(
      std::equal(a.values<float>().begin(), a.values<float>().end(), c.values<float>().begin()));
  const float bound = 1.0f / std::sqrt(784.0f);
  float mx = 0;
  for (float x : a.values<float>(*a.find("fc1.weight"))) mx = std::max(mx, std::fabs(x));
  REQUIRE(mx <= bound);
  REQUIRE(mx > 0.9f * bound);
}

TEST_CASE("mlp gradient matches central differences in double", "[ops]") {
  const std::int64_t B = 3;
  model<double> m = make_mlp<double>({.inputs = 12, .hidden = {7, 5}, .classes = 4});
  param_set p = m.make_params();
  test::randomize(p, 11);
  tensor x({B, 12}, dtype::f64);
  auto xv = test::random_values(B * 12, 12);
  std::copy(xv.begin(), xv.end(), x.data<double>());
  auto targets = std::make_shared<tensor>(shape_t{B}, dtype::i32);
  targets->data<std::int32_t>()[0] = 0;
  targets->data<std::int32_t>()[1] = 3;
  targets->data<std::int32_t>()[2] = 1;
  microbatch_ctx ctx{B, targets};
  auto r = test::check_model_gradient(m, p, x, ctx);
  INFO("worst element " << r.worst << ": analytic " << r.analytic << ", numeric " << r.numeric);
  REQUIRE(r.max_numeric > 0);
  REQUIRE(r.max_rel_error < 1e-6);
}

TEST_CASE("mlp returns logits when the context has no targets", "[ops]") {
  model<float> m = make_mlp<float>({.inputs = 6, .hidden = {5}, .classes = 3});
  param_set p = m.init_params(1);
  stage_forward f = forward_blocks(m, p, tensor({4, 6}, dtype::f32), microbatch_ctx{4, nullptr});
  REQUIRE(f.output.shape() == shape_t{4, 3});
}

TEST_CASE("mlp rejects an input of the wrong size", "[ops]") {
  model<float> m = make_mlp<float>({.inputs = 6, .hidden = {5}, .classes = 3});
  param_set p = m.init_params(1);
  REQUIRE_THROWS_WITH(forward_blocks(m, p, tensor({4, 5}, dtype::f32), microbatch_ctx{4, nullptr}),
                      Catch::Contains("fc1") && Catch::Contains("[4, 5]"));
}
