// Tests for text sampling: the requested length, determinism from the seed, and a model that
// has learnt a pattern reproduces it.
#include "ops/train/sample.hpp"

#include <catch2/catch.hpp>

#include "ops/train/sources.hpp"
#include "ops/train/trainer.hpp"

using namespace pipeworks;

TEST_CASE("sampling gives the requested bytes, deterministically from the seed", "[ops]") {
  const gpt_config cfg{.context = 16, .layers = 1, .heads = 2, .width = 16};
  model<float> m = make_gpt<float>(cfg);
  param_set p = m.init_params(1);
  const std::string a = sample_text(m, p, cfg, "ab", {.bytes = 40, .seed = 3});
  REQUIRE(a.size() == 40);
  REQUIRE(sample_text(m, p, cfg, "ab", {.bytes = 40, .seed = 3}) == a);
  REQUIRE(sample_text(m, p, cfg, "ab", {.bytes = 40, .seed = 4}) != a);
}

TEST_CASE("a gpt trained on a repeating string continues it", "[ops]") {
  const gpt_config cfg{.context = 16, .layers = 1, .heads = 2, .width = 32};
  model<float> m = make_gpt<float>(cfg);
  std::vector<std::uint8_t> text;
  const std::string unit = "abcdefg ";
  for (int i = 0; i < 4000; ++i) text.push_back(static_cast<std::uint8_t>(unit[i % unit.size()]));
  train_config c;
  c.steps = 150;
  c.optim.lr = 1e-2;
  c.warmup_steps = 10;
  trainer<float> t(m, m.init_params(1), c);
  auto last = train_loop<float>(t, text_minibatches(text, 8, cfg.context, 1), nullptr);
  REQUIRE(last.ok());
  const std::string s =
      sample_text(m, *t.weights(), cfg, "abcd", {.bytes = 12, .temperature = 0.1});
  REQUIRE(s == "efg abcdefg ");
}
