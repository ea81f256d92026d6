// The heart of the project, on one thread: every schedule, run by stage executors exchanging
// messages (in order and in a random order), ends with the weights of the sequential reference
// that applies the schedule's version rule literally; flush schedules equal plain gradient
// accumulation; the peak live versions are the theory's and the peak stashes the simulator's.
#include <catch2/catch.hpp>
#include <memory>

#include "ops/model/param_split.hpp"
#include "runtime/exec/local_run.hpp"
#include "runtime/exec/reference.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

struct outcome {
  bool ran = false;
  local_run_result run;
  std::vector<param_set> reference;
  std::shared_ptr<const schedule> plan;
};

outcome run_case(const semantics_case& c, std::uint64_t order_seed, int steps = ::steps) {
  outcome o;
  auto made = make_schedule(c.kind, c.params(steps));
  if (!made) return o;  // the generator does not permit these parameters
  o.plan = std::make_shared<const schedule>(lower_communication(*made));
  REQUIRE(validate(*o.plan).ok());
  const int S = o.plan->virtual_stages;
  model<float> mdl = c.gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  const param_set initial = mdl.init_params(7);
  const auto b = even_blocks(mdl.size(), o.plan->route_stages());  // dualpipe: p pieces
  const train_config cfg = semantics_train(steps, c.m, c.gpt);
  const std::int64_t B = 2 * c.m * c.w;
  minibatch_fn data = [&](std::int64_t t) -> result<minibatch> {
    return semantics_data(c.gpt, B, t, dtype::f32);
  };
  auto run = run_local(mdl, local_lowered_run(o.plan, b, cfg), initial, data, {.order_seed = order_seed});
  INFO(c.name());
  REQUIRE(run.ok());
  auto ref = reference_train(mdl, *made, b, initial, cfg, data);
  REQUIRE(ref.ok());
  o.run = std::move(*run);
  o.reference = std::move(*ref);
  o.ran = true;
  return o;
}

void check_case(const semantics_case& c, std::uint64_t order_seed) {
  outcome o = run_case(c, order_seed);
  if (!o.ran) return;
  INFO(c.name() << (order_seed ? " (random order)" : ""));
  const int S = o.plan->virtual_stages;
  for (int s = 0; s < S; ++s) {
    INFO("virtual stage " << s);
    REQUIRE(o.run.stages[s].steps == o.plan->params.steps);
    CHECK(max_relative_difference<float>(*o.run.weights[s], o.reference[s]) <= 1e-5);
    for (int r = 1; r < c.w; ++r)  // replicas apply the same reduced gradient
      CHECK(max_relative_difference<float>(*o.run.replica_weights[r * S + s], *o.run.weights[s]) == 0);
  }
}

}  // namespace

TEST_CASE("every schedule equals its sequential reference: mlp", "[runtime][semantics]") {
  int ran = 0;
  for (const auto& c : semantics_grid(false)) {
    check_case(c, 0);
    check_case(c, 0x5eed + static_cast<std::uint64_t>(c.p * 100 + c.m * 10 + c.w));
    ran += make_schedule(c.kind, c.params(steps)).ok();
  }
  CHECK(ran >= 150);  // most of the grid is permitted; a generator that refuses all fails here
}

// Cyclic's point-to-point reduce adds the same gradients in the same order as the collective one
// and applies the same update, only on the last replica: the same bits, on every replica.
TEST_CASE("cyclic with the p2p reduce ends with the collective reduce's bits", "[runtime][semantics]") {
  int ran = 0;
  for (bool gpt : {false, true})
    for (const auto& c : p2p_grid(gpt)) {
      if (gpt && c.m != c.w * (c.p - 2) + 1 && c.p > 2) continue;  // gpt-tiny: fewer cases
      semantics_case collective = c;
      collective.reduce = reduce_mode::collective;
      for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{0x9e3779b9} + c.m}) {
        if (gpt && seed) continue;
        check_case(c, seed);  // against the reference, and the replicas alike
        outcome a = run_case(c, seed), b = run_case(collective, 0);
        REQUIRE(a.ran);
        REQUIRE(b.ran);
        INFO(c.name() << (seed ? " (random order)" : ""));
        const int S = a.plan->virtual_stages;
        for (int r = 0; r < c.w; ++r)
          for (int s = 0; s < S; ++s) {
            INFO("replica " << r << ", virtual stage " << s);
            CHECK(same_bits(*a.run.replica_weights[r * S + s], *b.run.replica_weights[r * S + s]));
          }
        ++ran;
      }
    }
  CHECK(ran >= 40);
}

TEST_CASE("every schedule equals its sequential reference: gpt-tiny", "[runtime][semantics][slow]") {
  for (const auto& c : semantics_grid(true)) check_case(c, 0);
}

TEST_CASE("flush schedules equal single-device gradient accumulation", "[runtime][semantics]") {
  for (schedule_kind k : all_kinds) {
    if (!is_flush(k)) continue;
    // dualpipe mirrors an even p; its two routes sum their halves of the step as two replicas do.
    const bool mirrored = default_routes(k) > 1;
    for (int w : {1, 2}) {
      const semantics_case c{k, mirrored ? 4 : 3, mirrored ? 8 : 6, w, k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k), false};
      outcome o = run_case(c, 0);
      REQUIRE(o.ran);
      model<float> mdl = make_mlp<float>(small_mlp());
      train_config cfg = semantics_train(steps, c.m * c.w, false);
      trainer<float> single(mdl, mdl.init_params(7), cfg);
      double most = 0;
      for (int t = 0; t < steps; ++t) {
        auto r = single.step(semantics_data(false, 2 * c.m * c.w, t, dtype::f32));
        REQUIRE(r.ok());
        most = std::max(most, r->grad_norm);
        // The same global norm, summed over the stages by the driver: the same clip factor.
        CHECK(o.run.steps[static_cast<std::size_t>(t)].grad_norm == Approx(r->grad_norm).epsilon(1e-5));
      }
      CHECK(most > cfg.clip_grad_norm);  // clipping was at work
      // The model's stages: one route's (dualpipe's second route holds copies of them).
      auto joined = join_params(std::vector<param_snapshot>(
          o.run.weights.begin(), o.run.weights.begin() + o.plan->route_stages()));
      REQUIRE(joined.ok());
      INFO(c.name());
      CHECK(max_relative_difference<float>(*joined, *single.weights()) <= 1e-5);
      // One replica adds its microbatches' gradients in the order one device does: the same bits.
      if (w == 1 && !mirrored) CHECK(same_bits(*joined, *single.weights()));
    }
  }
}

TEST_CASE("peak live versions are p - s for PipeDream and 2 for 2BW and 1 for flush", "[runtime][semantics]") {
  for (int p : {2, 3, 4}) {
    // Enough steps for the steady state: p - s microbatches in flight on stage s, each its own.
    outcome pd = run_case({schedule_kind::pipedream, p, 1, 1, 1, false}, 0, 2 * p + 2);
    REQUIRE(pd.ran);
    for (int s = 0; s < p; ++s) CHECK(pd.run.stages[s].peak_versions == p - s);
    outcome bw = run_case({schedule_kind::two_bw, p, 2 * p + 1, 1, 1, false}, 0);
    REQUIRE(bw.ran);
    for (int s = 0; s < p; ++s) CHECK(bw.run.stages[s].peak_versions == 2);
    for (schedule_kind k : {schedule_kind::gpipe, schedule_kind::one_f_one_b, schedule_kind::zb_h1}) {
      outcome f = run_case({k, p, p, 1, 1, false}, 0);
      REQUIRE(f.ran);
      for (int s = 0; s < p; ++s) CHECK(f.run.stages[s].peak_versions == 1);
    }
  }
}

TEST_CASE("peak stashed microbatches equal the simulator's", "[runtime][semantics]") {
  for (const auto& c : semantics_grid(false)) {
    if (c.w != 1) continue;
    outcome o = run_case(c, 0);
    if (!o.ran) continue;
    auto sim = simulate(*o.plan, uniform_costs(1.0, 2.0, 1.0));
    REQUIRE(sim.ok());
    INFO(c.name());
    for (int s = 0; s < o.plan->virtual_stages; ++s) {
      const int d = o.plan->device_of[s];
      CHECK(o.run.stages[s].rank_peak_inflight == sim->ranks[d].peak_inflight);
      CHECK(o.run.stages[s].peak_versions == sim->ranks[d].peak_versions);
    }
  }
}
