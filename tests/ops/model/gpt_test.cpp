// Tests for the gpt: Hugging Face GPT-2 names and shapes, GPT-2 init, costs, and the whole-model
// gradient check in double.
#include "ops/model/gpt.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

TEST_CASE("gpt uses Hugging Face GPT-2 tensor names and shapes", "[ops]") {
  const gpt_config cfg = gpt_tiny();
  model<float> m = make_gpt<float>(cfg);
  REQUIRE(m.size() == cfg.layers + 2);
  param_set p = m.make_params();
  const std::int64_t C = cfg.width;
  std::vector<std::pair<std::string, shape_t>> want = {{"transformer.wte.weight", {256, C}},
                                                       {"transformer.wpe.weight", {64, C}}};
  for (int i = 0; i < cfg.layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    for (auto [n, s] :
         std::vector<std::pair<std::string, shape_t>>{{"ln_1.weight", {C}},
                                                      {"ln_1.bias", {C}},
                                                      {"attn.c_attn.weight", {C, 3 * C}},
                                                      {"attn.c_attn.bias", {3 * C}},
                                                      {"attn.c_proj.weight", {C, C}},
                                                      {"attn.c_proj.bias", {C}},
                                                      {"ln_2.weight", {C}},
                                                      {"ln_2.bias", {C}},
                                                      {"mlp.c_fc.weight", {C, 4 * C}},
                                                      {"mlp.c_fc.bias", {4 * C}},
                                                      {"mlp.c_proj.weight", {4 * C, C}},
                                                      {"mlp.c_proj.bias", {C}}})
      want.push_back({h + n, s});
  }
  want.push_back({"transformer.ln_f.weight", {C}});
  want.push_back({"transformer.ln_f.bias", {C}});
  want.push_back({"lm_head.weight", {256, C}});
  REQUIRE(p.entries().size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    REQUIRE(p.entries()[i].name == want[i].first);
    REQUIRE(p.entries()[i].shape == want[i].second);
  }
}

TEST_CASE("gpt-small is context 128, 8 layers, 4 heads, width 256", "[ops]") {
  const gpt_config c = gpt_small();
  REQUIRE(c.context == 128);
  REQUIRE(c.layers == 8);
  REQUIRE(c.heads == 4);
  REQUIRE(c.width == 256);
  model<float> m = make_gpt<float>(c);
  // 12 C^2 + 13 C per layer, embeddings, ln_f and lm_head.
  const std::int64_t C = 256;
  REQUIRE(m.param_count() == 8 * (12 * C * C + 13 * C) + 256 * C + 128 * C + 2 * C + 256 * C);
}

TEST_CASE("gpt init follows GPT-2", "[ops]") {
  const gpt_config cfg{.context = 32, .layers = 4, .heads = 2, .width = 64};
  model<float> m = make_gpt<float>(cfg);
  param_set p = m.init_params(3);
  auto stddev = [&](const char* name) {
    double s = 0, s2 = 0;
    auto v = p.values<float>(*p.find(name));
    for (float x : v) s += x, s2 += double(x) * x;
    const double n = static_cast<double>(v.size());
    return std::sqrt(s2 / n - (s / n) * (s / n));
  };
  REQUIRE(stddev("transformer.wte.weight") == Approx(0.02).epsilon(0.05));
  REQUIRE(stddev("transformer.h.1.mlp.c_fc.weight") == Approx(0.02).epsilon(0.05));
  REQUIRE(stddev("lm_head.weight") == Approx(0.02).epsilon(0.05));
  REQUIRE(stddev("transformer.h.2.attn.c_proj.weight") ==
          Approx(0.02 / std::sqrt(2.0 * 4)).epsilon(0.05));
  REQUIRE(stddev("transformer.h.0.mlp.c_proj.weight") ==
          Approx(0.02 / std::sqrt(2.0 * 4)).epsilon(0.05));
  for (float x : p.values<float>(*p.find("transformer.h.3.ln_2.weight"))) REQUIRE(x == 1.f);
  for (float x : p.values<float>(*p.find("transformer.ln_f.bias"))) REQUIRE(x == 0.f);
  for (float x : p.values<float>(*p.find("transformer.h.0.attn.c_attn.bias"))) REQUIRE(x == 0.f);
}

TEST_CASE("gpt at init predicts about uniformly: loss near ln 256", "[ops]") {
  model<float> m = make_gpt<float>(gpt_tiny());
  param_set p = m.init_params(1);
  tensor tokens = test::random_tokens(2, 64, 256, 5);
  auto targets = std::make_shared<const tensor>(test::random_tokens(2, 64, 256, 6));
  const double loss = test::model_loss(m, p, tokens, microbatch_ctx{2, targets});
  REQUIRE(loss == Approx(std::log(256.0)).margin(0.05));
}

TEST_CASE("gpt gradient matches central differences in double", "[ops]") {
  const gpt_config cfg{.context = 8, .layers = 2, .heads = 2, .width = 8};
  model<double> m = make_gpt<double>(cfg);
  param_set p = m.make_params();
  test::randomize(p, 21, 0.3);
  const std::int64_t B = 2, Tn = 5;  // shorter than the context
  tensor tokens = test::random_tokens(B, Tn, 256, 22);
  auto targets = std::make_shared<const tensor>(test::random_tokens(B, Tn, 256, 23));
  auto r = test::check_model_gradient(m, p, tokens, microbatch_ctx{B, targets});
  INFO("worst element " << r.worst << ": analytic " << r.analytic << ", numeric " << r.numeric);
  REQUIRE(r.max_numeric > 0);
  REQUIRE(r.max_rel_error < 1e-6);
}

TEST_CASE("gpt float and double agree on the loss", "[ops]") {
  const gpt_config cfg{.context = 16, .layers = 2, .heads = 2, .width = 16};
  model<float> mf = make_gpt<float>(cfg);
  model<double> md = make_gpt<double>(cfg);
  param_set pf = mf.init_params(9), pd = md.init_params(9);
  tensor tokens = test::random_tokens(2, 16, 256, 1);
  auto targets = std::make_shared<const tensor>(test::random_tokens(2, 16, 256, 2));
  const double lf = test::model_loss(mf, pf, tokens, {2, targets});
  const double ld = test::model_loss(md, pd, tokens, {2, targets});
  REQUIRE(lf == Approx(ld).epsilon(1e-5));
}

TEST_CASE("gpt rejects bad configurations and out-of-range tokens", "[ops]") {
  REQUIRE_THROWS(make_gpt<float>({.context = 8, .layers = 1, .heads = 3, .width = 8}));
  model<float> m = make_gpt<float>(gpt_tiny());
  param_set p = m.init_params(1);
  tensor tokens({1, 65}, dtype::i32);
  REQUIRE_THROWS_WITH(forward_blocks(m, p, std::move(tokens), {1, nullptr}),
                      Catch::Contains("T <= 64"));
  tensor bad({1, 4}, dtype::i32);
  bad.data<std::int32_t>()[2] = 300;
  REQUIRE_THROWS_WITH(forward_blocks(m, p, std::move(bad), {1, nullptr}), Catch::Contains("300"));
}
