// The predicted memory of every schedule, w in {1, 2}, in each recompute mode, against what the
// executors measure running it (in order and in a random order): the same peaks of stashed bytes,
// microbatches in flight and weight versions, and the same optimizer moments (under ZeRO each
// replica's share), per virtual stage.
#include <catch2/catch.hpp>
#include <memory>

#include "runtime/exec/local_run.hpp"
#include "runtime/lower.hpp"
#include "runtime/memory_plan.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

// Returns whether the generator permits the case.
bool check_prediction(const semantics_case& c, recompute_mode mode, std::uint64_t order_seed,
                      int zero = 0) {
  auto made = make_schedule(c.kind, c.params(steps));
  if (!made) return false;
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  const int S = plan->virtual_stages;
  const model<float> mdl = make_gpt<float>(tiny_gpt(S));
  const param_set initial = mdl.init_params(7);
  train_config cfg = semantics_train(steps, c.m, true);
  lowered_run run = local_lowered_run(plan, even_blocks(mdl.size(), plan->route_stages()), cfg);
  run.plan.recompute = mode;
  run.plan.zero = zero;
  const std::int64_t B = 2 * c.m * c.w;
  minibatch_fn data = [B](std::int64_t t) -> result<minibatch> {
    return semantics_data(true, B, t, dtype::f32);
  };
  INFO(c.name() << ", recompute " << recompute_name(mode) << (order_seed ? ", random order" : "")
               << ", zero " << zero);
  auto measured = run_local(mdl, run, initial, data, {.order_seed = order_seed});
  REQUIRE(measured.ok());
  const minibatch sample = semantics_data(true, 2, 0, dtype::f32);  // one microbatch: 2 samples
  auto bytes = measure_stage_bytes(mdl, sample, run.boundaries, mode, cfg.optim.kind,
                                   zero > 0 ? c.w : 1);
  REQUIRE(bytes.ok());
  const std::vector<stage_memory> predicted = predict_memory(*run.programs, *bytes, mode);
  REQUIRE(static_cast<int>(predicted.size()) == S);
  for (int s = 0; s < S; ++s) {
    INFO("virtual stage " << s);
    const stage_stats& got = measured->stages[s];
    CHECK(predicted[s].activations == got.peak_activation_bytes);
    CHECK(predicted[s].peak_inflight == got.peak_inflight);
    CHECK(predicted[s].peak_versions == got.peak_versions);
    CHECK(predicted[s].weights == predicted[s].peak_versions * (*bytes)[s].weights);
    CHECK(predicted[s].moments == got.optimizer_bytes);
    CHECK(predicted[s].total() > predicted[s].activations);
  }
  return true;
}

}  // namespace

TEST_CASE("predicted memory equals the measured peaks for every schedule and recompute mode",
          "[runtime][memory]") {
  int ran = 0;
  for (schedule_kind k : all_kinds)
    for (int p : {2, 3})
      for (int w : {1, 2}) {
        const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
        for (int m : {p, 2 * p + 1})
          for (recompute_mode mode : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
            ran += check_prediction({k, p, m, w, v, true}, mode, m == p ? 0 : 29);
      }
  CHECK(ran >= 200);
}

TEST_CASE("predicted optimizer moments equal each ZeRO replica's measured share", "[runtime][memory]") {
  int ran = 0;
  for (schedule_kind k : {schedule_kind::one_f_one_b, schedule_kind::two_bw, schedule_kind::cyclic})
    for (int w : {2, 4})
      for (int zero : {1, 2}) ran += check_prediction({k, 2, 4, w, 1, true}, recompute_mode::none, 0, zero);
  CHECK(ran >= 10);
}

TEST_CASE("a backward before its forward is refused by the memory walk", "[runtime][memory]") {
  auto made = make_schedule(schedule_kind::one_f_one_b, schedule_params{2, 2, 1, 1, 1});
  REQUIRE(made.ok());
  schedule s = *made;
  auto& prog = s.programs[0];
  const auto f = std::find_if(prog.begin(), prog.end(), [](const action& a) { return a.kind == action_kind::forward; });
  REQUIRE(f != prog.end());
  prog.erase(f);
  CHECK_THROWS_WITH(predict_memory(s, std::vector<stage_bytes>(2), recompute_mode::none),
                    Catch::Contains("before its forward"));
}
