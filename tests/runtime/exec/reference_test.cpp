// Tests for reference_train: flush schedules equal the single-device trainer (also with
// replicas), 2BW and cyclic equal their update rules computed by hand, PipeDream's stashed
// versions change the result, and bad version tables are refused.
#include "runtime/exec/reference.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "ops/model/mlp.hpp"
#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;

namespace {

constexpr int inputs = 12, classes = 4;

template <class T>
model<T> small_mlp(std::vector<int> hidden = {16, 8}) {
  return make_mlp<T>({.inputs = inputs, .hidden = std::move(hidden), .classes = classes});
}

// Step t's minibatch of B rows, the same for every run.
template <class T>
minibatch_fn data(std::int64_t B) {
  return [B](std::int64_t t) -> result<minibatch> {
    minibatch mb{tensor({B, inputs}, dtype_of<T>()), tensor({B}, dtype::i32)};
    auto v = test::random_values(B * inputs, 1000 + static_cast<std::uint64_t>(t));
    std::copy(v.begin(), v.end(), mb.inputs.data<T>());
    auto l = test::random_values(B, 2000 + static_cast<std::uint64_t>(t), 0, classes);
    for (std::int64_t i = 0; i < B; ++i)
      mb.targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(l[i]);
    return mb;
  };
}

train_config sgd(std::int64_t steps, int m, double momentum = 0.9) {
  train_config c;
  c.steps = steps;
  c.microbatches = m;
  c.optim = default_optimizer_config(optimizer_kind::sgd);
  c.optim.lr = 0.2;
  c.optim.momentum = momentum;
  c.min_lr = c.optim.lr;  // a constant rate
  return c;
}

schedule make(schedule_kind kind, int p, int m, int w, int steps, int v = 1) {
  auto s = make_schedule(kind, schedule_params{p, m, v, w, steps});
  REQUIRE(s.ok());
  return std::move(*s);
}

// max_i |a_i - b_i| / max(|b_i|, 1e-3 max_j |b_j|): relative per element, with a floor.
template <class T>
double rel_diff(std::span<const T> a, std::span<const T> b) {
  REQUIRE(a.size() == b.size());
  double scale = 0;
  for (T x : b) scale = std::max(scale, std::fabs(static_cast<double>(x)));
  const double floor = std::max(1e-3 * scale, 1e-30);
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    worst = std::max(worst, d / std::max(std::fabs(static_cast<double>(b[i])), floor));
  }
  return worst;
}

// The largest rel_diff over the stages' blocks against a whole-model param_set.
template <class T>
double rel_diff(const std::vector<param_set>& stages, const param_set& whole) {
  double worst = 0;
  for (const param_set& p : stages)
    for (int b = p.first_block(); b < p.end_block(); ++b)
      worst = std::max(worst, rel_diff<T>(p.block_values<T>(b), whole.block_values<T>(b)));
  return worst;
}

template <class T>
double rel_diff(const std::vector<param_set>& a, const std::vector<param_set>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t s = 0; s < a.size(); ++s)
    worst = std::max(worst, rel_diff<T>(a[s].values<T>(), b[s].values<T>()));
  return worst;
}

// The trainer's weights after `steps` steps of m microbatches on the same data.
template <class T>
param_set trainer_weights(const model<T>& m, const train_config& cfg, std::int64_t B) {
  trainer<T> t(m, m.init_params(3), cfg);
  const minibatch_fn next = data<T>(B);
  for (std::int64_t s = 0; s < cfg.steps; ++s) REQUIRE(t.step(next(s).value()).ok());
  return t.weights()->clone();
}

template <class T>
void check_flush_equals_trainer(double tol) {
  const model<T> m = small_mlp<T>();
  const schedule plan = make(schedule_kind::one_f_one_b, 2, 4, 1, 3);
  const train_config cfg = sgd(3, 4);
  auto ref = reference_train(m, plan, {0, 1, 3}, m.init_params(3), cfg, data<T>(8));
  REQUIRE(ref.ok());
  REQUIRE(ref->size() == 2);
  const param_set want = trainer_weights(m, cfg, 8);
  REQUIRE(rel_diff<T>(*ref, want) <= tol);
  // The weights moved, so the comparison says something.
  REQUIRE(rel_diff<T>(*ref, m.init_params(3)) > 1e-3);
}

}  // namespace

TEST_CASE("reference of 1f1b equals the single-device trainer (double)", "[runtime]") {
  check_flush_equals_trainer<double>(1e-12);
}

TEST_CASE("reference of 1f1b equals the single-device trainer (float)", "[runtime]") {
  check_flush_equals_trainer<float>(1e-6);
}

TEST_CASE("reference with 2 replicas of 2 microbatches equals the trainer with 4", "[runtime]") {
  // Dealing sends rows [0,2) and [4,6) to replica 0 and [2,4), [6,8) to replica 1: the sum over
  // replicas and microbatches covers the same rows, each scaled by 1/(m w) = 1/4.
  const model<double> m = small_mlp<double>();
  const schedule plan = make(schedule_kind::one_f_one_b, 2, 2, 2, 3);
  auto ref = reference_train(m, plan, {0, 2, 3}, m.init_params(3), sgd(3, 2), data<double>(8));
  REQUIRE(ref.ok());
  REQUIRE(rel_diff<double>(*ref, trainer_weights(m, sgd(3, 4), 8)) <= 1e-12);
  // Training on only the first half of the rows ends elsewhere, so the comparison can tell.
  REQUIRE(rel_diff<double>(*ref, trainer_weights(m, sgd(3, 4), 4)) > 1e-6);
}

TEST_CASE("reference of every flush schedule equals the trainer", "[runtime]") {
  const model<double> m = small_mlp<double>({16, 12, 8});  // 4 blocks
  for (auto [kind, v] : {std::pair{schedule_kind::gpipe, 1},
                         {schedule_kind::zb_h1, 1},
                         {schedule_kind::zb_h2, 1},
                         {schedule_kind::interleaved, 2},
                         {schedule_kind::bfs, 2}}) {
    INFO(schedule_name(kind));
    const schedule plan = make(kind, 2, 4, 1, 2, v);
    const std::vector<int> b = v == 1 ? std::vector<int>{0, 2, 4} : std::vector<int>{0, 1, 2, 3, 4};
    auto ref = reference_train(m, plan, b, m.init_params(3), sgd(2, 4), data<double>(8));
    REQUIRE(ref.ok());
    REQUIRE(rel_diff<double>(*ref, trainer_weights(m, sgd(2, 4), 8)) <= 1e-12);
  }
}

TEST_CASE("reference of 2bw follows W(t+1) = W(t) - lr grad f(W(t-1))", "[runtime]") {
  const model<double> m = small_mlp<double>();
  const int steps = 4, mbs = 2;
  const train_config cfg = sgd(steps, mbs, 0.0);  // plain SGD: no momentum, no weight decay
  REQUIRE(cfg.optim.weight_decay == 0.0);
  const schedule plan = make(schedule_kind::two_bw, 2, mbs, 1, steps);
  const minibatch_fn next = data<double>(8);
  auto ref = reference_train(m, plan, {0, 1, 3}, m.init_params(3), cfg, next);
  REQUIRE(ref.ok());

  // By hand: the gradient of step t at W(max(t-1, 0)), the update applied to W(t).
  param_set prev = m.init_params(3), cur = m.init_params(3);
  for (int t = 0; t < steps; ++t) {
    trainer<double> at_old(m, prev.clone(), cfg);
    std::vector<microbatch> micro = split_minibatch(next(t).value(), mbs).value();
    for (microbatch& u : micro) at_old.accumulate(std::move(u), 1.0 / mbs);
    param_set upd = cur.clone();
    auto w = upd.values<double>();
    auto g = at_old.gradients().values<double>();
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= cfg.optim.lr * g[i];
    prev = std::move(cur);
    cur = std::move(upd);
  }
  REQUIRE(rel_diff<double>(*ref, cur) <= 1e-12);
  // The delay matters: a flush run from the same start ends elsewhere.
  REQUIRE(rel_diff<double>(*ref, trainer_weights(m, cfg, 8)) > 1e-6);
}

TEST_CASE("reference of cyclic with 2 replicas sums each replica's shifted window", "[runtime]") {
  // p = 2, m = 2, w = 2: replica 1 is shifted by floor(1 * 2 / 2) = 1 microbatch, so its update
  // u covers ids {2u+1, 2u+2} (update 0 also id 0, the last update only id 2T-1), replica 0's
  // ids {2u, 2u+1}. Every microbatch of step t uses version max(t-1, 0) (split = m = 2).
  const model<double> m = small_mlp<double>();
  const int steps = 3, mbs = 2, w = 2, total = steps * mbs;
  const train_config cfg = sgd(steps, mbs, 0.0);
  const schedule plan = make(schedule_kind::cyclic, 2, mbs, w, steps);
  for (int id = 0; id < total; ++id)
    REQUIRE(plan.versions[0][id].forward == std::max(id / mbs - 1, 0));
  const minibatch_fn next = data<double>(8);
  auto ref = reference_train(m, plan, {0, 1, 3}, m.init_params(3), cfg, next);
  REQUIRE(ref.ok());

  auto window = [&](int r, int id) {  // the update replica r's gradient of id goes into
    const int off = r == 1 ? 1 : 0;
    return std::clamp((id - off) / mbs, 0, steps - 1);
  };
  std::vector<param_set> version;
  version.push_back(m.init_params(3));
  for (int u = 0; u < steps; ++u) {
    param_set g = version[0].zeros_like();
    for (int r = 0; r < w; ++r)
      for (int id = 0; id < total; ++id) {
        if (window(r, id) != u) continue;
        const int v = std::max(id / mbs - 1, 0);
        trainer<double> at(m, version[v].clone(), cfg);
        auto dealt = split_minibatch(next(id / mbs).value(), mbs * w).value();
        at.accumulate(std::move(dealt[(id % mbs) * w + r]), 1.0 / (mbs * w));
        auto a = g.values<double>();
        auto b = at.gradients().values<double>();
        for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
      }
    param_set upd = version[u].clone();
    auto x = upd.values<double>();
    auto d = g.values<double>();
    for (std::size_t i = 0; i < x.size(); ++i) x[i] -= cfg.optim.lr * d[i];
    version.push_back(std::move(upd));
  }
  REQUIRE(rel_diff<double>(*ref, version.back()) <= 1e-12);
  // 2BW has the same version table but unshifted windows (update t is step t on every
  // replica), and ends elsewhere.
  auto two_bw = make(schedule_kind::two_bw, 2, mbs, w, steps);
  REQUIRE(two_bw.versions == plan.versions);
  auto unshifted = reference_train(m, two_bw, {0, 1, 3}, m.init_params(3), cfg, next);
  REQUIRE(unshifted.ok());
  REQUIRE(rel_diff<double>(*ref, *unshifted) > 1e-6);
}

TEST_CASE("pipedream's stashed versions differ by stage and change the weights", "[runtime]") {
  const model<double> m = small_mlp<double>();
  const int steps = 4;
  const schedule async = make(schedule_kind::pipedream, 3, 1, 1, steps);
  const schedule flush = make(schedule_kind::one_f_one_b, 3, 1, 1, steps);
  // Stage 0 runs three forwards before its first update; the last stage updates after each one.
  REQUIRE(async.versions[0] != async.versions[2]);
  REQUIRE(async.versions[0][2].forward == 0);
  REQUIRE(async.versions[2][2].forward == 2);
  const std::vector<int> b{0, 1, 2, 3};
  auto a = reference_train(m, async, b, m.init_params(3), sgd(steps, 1), data<double>(4));
  auto f = reference_train(m, flush, b, m.init_params(3), sgd(steps, 1), data<double>(4));
  REQUIRE(a.ok());
  REQUIRE(f.ok());
  REQUIRE(rel_diff<double>(*a, *f) > 1e-6);
  // The flush reference is the trainer; pipedream's last stage uses its latest version.
  REQUIRE(rel_diff<double>(*f, trainer_weights(m, sgd(steps, 1), 4)) <= 1e-12);
}

TEST_CASE("reference refuses versions that do not exist yet and split F/B versions", "[runtime]") {
  const model<double> m = small_mlp<double>();
  schedule plan = make(schedule_kind::one_f_one_b, 2, 2, 1, 2);
  const param_set init = m.init_params(3);

  schedule future = plan;
  future.versions[1][1] = {1, 1};  // step 0 has only version 0
  auto r = reference_train(m, future, {0, 1, 3}, init, sgd(2, 2), data<double>(4));
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains("stage 1, microbatch 1") &&
                                Catch::Contains("version 1") && Catch::Contains("0..0"));

  schedule split_fb = plan;
  split_fb.versions[0][2] = {1, 0};
  r = reference_train(m, split_fb, {0, 1, 3}, init, sgd(2, 2), data<double>(4));
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains("requires equal F/B versions"));

  r = reference_train(m, plan, {0, 3}, init, sgd(2, 2), data<double>(4));
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains("needs 3 stage boundaries"));
  r = reference_train(m, plan, {0, 3, 3}, init, sgd(2, 2), data<double>(4));
  REQUIRE_FALSE(r.ok());
  r = reference_train(m, plan, {0, 1, 3}, init, sgd(2, 2), data<double>(5));
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains("B = 5"));
  r = reference_train(m, plan, {0, 1, 3}, m.init_params(3, 1), sgd(2, 2), data<double>(4));
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains("whole model"));
}
