// Tests for the single-device trainer: accumulation equals one big batch, snapshots are never
// changed in place, bad losses stop the run, and real training reaches its targets ([slow]).
#include "ops/train/trainer.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "ops/cpu_threads.hpp"
#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "ops/train/evaluate.hpp"
#include "ops/train/sources.hpp"
#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;

namespace {

minibatch random_images(std::int64_t B, int inputs, int classes, std::uint64_t seed) {
  minibatch mb{tensor({B, inputs}, dtype::f64), tensor({B}, dtype::i32)};
  auto v = test::random_values(B * inputs, seed);
  std::copy(v.begin(), v.end(), mb.inputs.data<double>());
  auto l = test::random_values(B, seed + 1, 0, classes);
  for (std::int64_t i = 0; i < B; ++i) mb.targets.data<std::int32_t>()[i] = static_cast<int>(l[i]);
  return mb;
}

train_config sgd_config(std::int64_t steps, int m) {
  train_config c;
  c.steps = steps;
  c.microbatches = m;
  c.optim = default_optimizer_config(optimizer_kind::sgd);
  c.optim.lr = 0.05;
  c.min_lr = 0.05;
  return c;
}

}  // namespace

TEST_CASE("accumulating m microbatches gives the weights of one full batch", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 10, .hidden = {8, 6}, .classes = 3});
  for (optimizer_kind kind : {optimizer_kind::sgd, optimizer_kind::adamw}) {
    train_config c1 = sgd_config(3, 1), c4 = sgd_config(3, 4);
    c1.optim.kind = c4.optim.kind = kind;
    trainer<double> one(m, m.init_params(1), c1), four(m, m.init_params(1), c4);
    for (int s = 0; s < 3; ++s) {
      minibatch mb = random_images(12, 10, 3, 100 + s);
      auto a = one.step(mb);
      auto b = four.step(mb);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(a->loss == Approx(b->loss).epsilon(1e-12));
    }
    auto wa = one.weights()->values<double>(), wb = four.weights()->values<double>();
    for (std::size_t i = 0; i < wa.size(); ++i) REQUIRE(wa[i] == Approx(wb[i]).epsilon(1e-10));
  }
}

TEST_CASE("a step makes a new snapshot and leaves the old one untouched", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 5, .hidden = {4}, .classes = 2});
  trainer<double> t(m, m.init_params(2), sgd_config(2, 1));
  param_snapshot before = t.weights();
  const std::vector<double> copy(before->values<double>().begin(), before->values<double>().end());
  auto r = t.step(random_images(4, 5, 2, 9));
  REQUIRE(r.ok());
  REQUIRE(r->step == 1);
  REQUIRE(t.weights() != before);
  REQUIRE(std::equal(copy.begin(), copy.end(), before->values<double>().begin()));
  REQUIRE_FALSE(std::equal(copy.begin(), copy.end(), t.weights()->values<double>().begin()));
  for (double g : t.gradients().values<double>()) REQUIRE(g == 0.0);
  // Versions nobody holds are recycled; one still held is never written again.
  for (int s = 0; s < 3; ++s) REQUIRE(t.step(random_images(4, 5, 2, 20 + s)).ok());
  REQUIRE(std::equal(copy.begin(), copy.end(), before->values<double>().begin()));
}

TEST_CASE("a non-finite loss stops the run with a clear error", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 5, .hidden = {4}, .classes = 2});
  trainer<double> t(m, m.init_params(2), sgd_config(2, 1));
  minibatch mb = random_images(4, 5, 2, 9);
  mb.inputs.data<double>()[3] = std::nan("");
  auto r = t.step(mb);
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains("not finite") && Catch::Contains("step 1"));
}

TEST_CASE("train_loop runs to the configured steps and the loss falls", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 6, .hidden = {16}, .classes = 3});
  train_config c = sgd_config(60, 2);
  trainer<double> t(m, m.init_params(3), c);
  const minibatch fixed = random_images(8, 6, 3, 5);
  std::vector<double> losses;
  auto last = train_loop<double>(
      t,
      [&](std::int64_t) -> result<minibatch> {
        return minibatch{fixed.inputs.clone(), fixed.targets.clone()};
      },
      [&](const step_metrics& s) { losses.push_back(s.loss); });
  REQUIRE(last.ok());
  REQUIRE(last->step == 60);
  REQUIRE(losses.size() == 60);
  REQUIRE(losses.back() < 0.5 * losses.front());
  REQUIRE(last->samples == 60 * 8);
}

TEST_CASE("a bad training configuration names the field", "[ops]") {
  train_config c = sgd_config(10, 1);
  c.warmup_steps = -1;
  REQUIRE_THAT(validate(c).message(), Catch::Contains("warmup"));
  c = sgd_config(0, 1);
  REQUIRE_THAT(validate(c).message(), Catch::Contains("steps"));
}

TEST_CASE("mlp on Fashion-MNIST reaches 80% test accuracy in 400 steps", "[ops][slow]") {
  set_cpu_threads(0);
  auto train = load_fashion_mnist(dataset_split::train);
  auto test_set = load_fashion_mnist(dataset_split::test);
  INFO((train.ok() ? "" : train.message()));
  REQUIRE(train.ok());
  INFO((test_set.ok() ? "" : test_set.message()));
  REQUIRE(test_set.ok());
  model<float> m = make_mlp<float>({});
  train_config c;
  c.steps = 400;
  c.optim = default_optimizer_config(optimizer_kind::adamw);
  c.optim.lr = 2e-3;
  c.min_lr = 2e-4;
  c.warmup_steps = 20;
  trainer<float> t(m, m.init_params(1), c);
  auto data = std::make_shared<const image_dataset>(std::move(*train));
  auto last = train_loop<float>(t, image_minibatches(data, 100, 1), nullptr);
  REQUIRE(last.ok());
  auto acc = accuracy(m, *t.weights(), image_set(*test_set), 1000);
  REQUIRE(acc.ok());
  WARN("mlp test accuracy after 400 steps of 100: " << *acc);
  REQUIRE(*acc >= 0.80);
}

TEST_CASE("gpt-tiny on the fortunes text falls from ln 256 to below 2.6", "[ops][slow]") {
  set_cpu_threads(0);
  auto text = load_text(fortunes_default_dir);
  INFO((text.ok() ? "" : text.message()));
  REQUIRE(text.ok());
  const text_split split = split_text(text->view());
  const gpt_config cfg = gpt_tiny();
  model<float> m = make_gpt<float>(cfg);
  train_config c;
  c.steps = 300;
  c.optim = default_optimizer_config(optimizer_kind::adamw);
  c.optim.lr = 5e-3;
  c.min_lr = 5e-4;
  c.warmup_steps = 30;
  c.clip_grad_norm = 1.0;
  trainer<float> t(m, m.init_params(1), c);
  auto held_out = text_windows(split.validation, 64, cfg.context);
  REQUIRE(held_out.ok());
  const double initial = *mean_loss(m, *t.weights(), *held_out, 16);
  REQUIRE(initial == Approx(std::log(256.0)).margin(0.1));
  auto last = train_loop<float>(t, text_minibatches(split.train, 32, cfg.context, 1), nullptr);
  REQUIRE(last.ok());
  const double final_loss = *mean_loss(m, *t.weights(), *held_out, 16);
  WARN("gpt-tiny held-out loss: " << initial << " -> " << final_loss << " (last training loss "
                                  << last->loss << ")");
  REQUIRE(final_loss < 2.6);
}
