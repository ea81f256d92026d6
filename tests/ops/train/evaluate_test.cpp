// Tests for evaluation: accuracy counts argmax hits, mean loss weighs every row equally, and a
// checkpoint round trip (train, save, load, eval) gives a bit-identical loss.
#include "ops/train/evaluate.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "ops/model/param_io.hpp"
#include "ops/train/sources.hpp"
#include "ops/train/trainer.hpp"
#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

TEST_CASE("accuracy counts the rows whose largest logit is the label", "[ops]") {
  // One linear layer 2 -> 2 with identity weights: the logits are the inputs.
  model<float> m = make_mlp<float>({.inputs = 2, .hidden = {}, .classes = 2});
  param_set p = m.make_params();
  p.view<float>("fc1.weight").data[0] = 1.f;
  p.view<float>("fc1.weight").data[3] = 1.f;
  minibatch data{tensor({4, 2}, dtype::f32), tensor({4}, dtype::i32)};
  const float x[] = {1, 0, 0, 1, 1, 0, 0, 1};
  const std::int32_t y[] = {0, 1, 1, 1};
  std::copy(std::begin(x), std::end(x), data.inputs.data<float>());
  std::copy(std::begin(y), std::end(y), data.targets.data<std::int32_t>());
  REQUIRE(*accuracy(m, p, data, 3) == Approx(0.75));
  REQUIRE_FALSE(accuracy(m, m.make_params(1, 1), data, 3).ok());
}

TEST_CASE("mean_loss does not depend on the evaluation batch", "[ops]") {
  model<double> m = make_gpt<double>({.context = 8, .layers = 1, .heads = 2, .width = 8});
  param_set p = m.init_params(3);
  minibatch data{test::random_tokens(5, 8, 256, 1), test::random_tokens(5, 8, 256, 2)};
  const double a = *mean_loss(m, p, data, 5);
  REQUIRE(*mean_loss(m, p, data, 2) == Approx(a).epsilon(1e-12));
  REQUIRE(*mean_loss(m, p, data, 1) == Approx(a).epsilon(1e-12));
}

TEST_CASE("checkpoint round trip: save, load and eval give a bit-identical loss", "[ops]") {
  const gpt_config cfg = gpt_tiny();
  model<float> m = make_gpt<float>(cfg);
  std::vector<std::uint8_t> text;
  for (int i = 0; i < 6000; ++i)
    text.push_back(static_cast<std::uint8_t>("hello, world. "[i % 14]));
  train_config c;
  c.steps = 5;
  c.optim.lr = 1e-2;
  trainer<float> t(m, m.init_params(1), c);
  REQUIRE(train_loop<float>(t, text_minibatches(text, 4, cfg.context, 1), nullptr).ok());
  auto windows = text_windows(text, 20, cfg.context);
  REQUIRE(windows.ok());
  const double before = *mean_loss(m, *t.weights(), *windows, 8);

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pipeworks_eval_" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  REQUIRE(save_params(path, *t.weights()).ok());
  param_set loaded = m.make_params();
  REQUIRE(load_params(path, loaded).ok());
  const double after = *mean_loss(m, loaded, *windows, 8);
  std::filesystem::remove(path);
  REQUIRE(before == after);  // bit-identical, not approximately equal
  REQUIRE(before < std::log(256.0));
}
