// Tests for DualPipe (runtime/schedules/dualpipev.cpp): the mirrored placement and its two
// routes, the order of DeepSeek's dualpipe.py, validity over p, m, steps and replicas, the
// parameter errors, and the REDUCE that joins a stage's two copies on the mirrored devices.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/schedule_test_util.hpp"

using namespace pipeworks;

namespace {

schedule_params params(int p, int m, int steps = 1, int w = 1) {
  return test::params(p, m, steps, w, 2);
}

}  // namespace

TEST_CASE("dualpipe runs two routes over mirrored copies of p stages", "[runtime]") {
  auto s = dualpipe(params(4, 8));
  REQUIRE(s.ok());
  CHECK(s->virtual_stages == 8);
  CHECK(s->routes == 2);
  CHECK(s->route_stages() == 4);
  // Route 0 down the devices (stages 0..3 on devices 0..3), route 1 up them (stages 4..7 on
  // devices 3..0): device d holds piece d of one route and piece 3 - d of the other.
  CHECK(s->device_of == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
  for (int st = 0; st < 8; ++st) {
    CHECK(s->piece_of(st) == st % 4);
    CHECK(s->starts_route(st) == (st == 0 || st == 4));
    CHECK(s->ends_route(st) == (st == 3 || st == 7));
  }
  CHECK(s->params.microbatches == 4);  // each route's half of the step's 8
  CHECK(s->reduce_group_size() == 2);
  CHECK(is_flush(schedule_kind::dualpipe));
  CHECK(splits_backward(schedule_kind::dualpipe));
  CHECK(default_chunks(schedule_kind::dualpipe) == 2);
  CHECK_FALSE(is_v_shape(schedule_kind::dualpipe));
}

TEST_CASE("dualpipe matches DeepSeek's dualpipe.py order at 2 ranks and 4 chunks", "[runtime]") {
  auto s = dualpipe(params(2, 4));
  REQUIRE(s.ok());
  // Worked by hand from dualpipe.py's step(): rank 0 (the first half: phase 0 runs down, stage
  // 0; phase 1 up, stage 3) runs step 2 (F0 F1), step 4's middle-rank turn (F0, then B1 not
  // overlapped) and F1&B0, step 6 (B1, then B0 as zero bubble's I) and step 8 (W). Rank 1 (the
  // second half) runs the same with its phases swapped: phase 0 up (stage 2), phase 1 down (1).
  CHECK(to_string(s->programs[0]) ==
        "0F0 3F0 0F1 3B0 (3F1;0B0)OVERLAP_F_B 3B1 3REDUCE 3STEP 0I1 0W1 0REDUCE 0STEP");
  CHECK(to_string(s->programs[1]) ==
        "2F0 1F0 2F1 1B0 (1F1;2B0)OVERLAP_F_B 1B1 1REDUCE 1STEP 2I1 2W1 2REDUCE 2STEP");
}

TEST_CASE("dualpipe validates for p 2 to 8, m even from 2p to 4p + 2, steps and replicas",
          "[runtime]") {
  int checked = 0;
  for (int p = 2; p <= 8; p += 2)
    for (int m = 2 * p; m <= 4 * p + 2; m += 2)
      for (int steps : {1, 2})
        for (int w : {1, 2}) {
          INFO("p=" << p << " m=" << m << " steps=" << steps << " w=" << w);
          auto s = dualpipe(params(p, m, steps, w));
          REQUIRE(s.ok());
          CHECK(validate(*s).message() == "");
          const schedule lowered = lower_communication(*s);
          CHECK(validate(lowered).message() == "");
          // Every stage runs m/2 forwards a step on each replica, one REDUCE and one STEP.
          for (int r = 0; r < lowered.ranks(); ++r) {
            int forwards = 0, reduces = 0, steps_run = 0, sends_out_of_route = 0;
            for (const action& a : lowered.programs[r]) {
              forwards += a.kind == action_kind::forward;
              reduces += a.kind == action_kind::reduce;
              steps_run += a.kind == action_kind::step;
              sends_out_of_route += a.kind == action_kind::send_f && lowered.ends_route(a.stage);
            }
            CHECK(forwards == 2 * (m / 2) * steps);
            CHECK(reduces == 2 * steps);
            CHECK(steps_run == 2 * steps);
            CHECK(sends_out_of_route == 0);
          }
          ++checked;
        }
  CHECK(checked == 2 * 2 * (4 + 6 + 8 + 10));
}

TEST_CASE("dualpipe refuses an odd stage count, an odd m and fewer than 2p microbatches",
          "[runtime]") {
  auto odd_p = dualpipe(params(3, 6));
  REQUIRE_FALSE(odd_p.ok());
  CHECK(odd_p.message().find("even stage count p (got p = 3); use p = 4, or dualpipev") !=
        std::string::npos);
  auto odd_m = dualpipe(params(2, 5));
  REQUIRE_FALSE(odd_m.ok());
  CHECK(odd_m.message().find("m must be even and at least 2p (got m = 5, p = 2); use m = 6") !=
        std::string::npos);
  auto few = dualpipe(params(4, 6));
  REQUIRE_FALSE(few.ok());
  CHECK(few.message().find("use m = 8") != std::string::npos);
  auto chunks = dualpipe(test::params(2, 4, 1, 1, 1));
  REQUIRE_FALSE(chunks.ok());
  CHECK(chunks.message().find("chunk count v must be 2") != std::string::npos);
}

TEST_CASE("dualpipe's two copies of a stage meet at REDUCE, on mirrored devices", "[runtime]") {
  // Each REDUCE ends when the later of the stage's two copies arrives plus the REDUCE time, on
  // both devices: the copies leave it together. With the REDUCE missing on one copy, the other
  // waits forever: the validator names the deadlock.
  cost_model c = uniform_costs(1.0, 2.0, 1.0);
  c.stages[0].reduce = 5.0;
  auto s = dualpipe(params(4, 8));
  REQUIRE(s.ok());
  auto sim = simulate(lower_communication(*s), c);
  REQUIRE(sim.ok());
  int pairs = 0;
  for (const timeline_event& a : sim->trace.events)
    for (const timeline_event& b : sim->trace.events)
      if (a.act.kind == action_kind::reduce && b.act.kind == action_kind::reduce &&
          a.act.stage < b.act.stage && s->piece_of(a.act.stage) == s->piece_of(b.act.stage)) {
        INFO("stages " << a.act.stage << " and " << b.act.stage);
        CHECK(a.end == b.end);
        CHECK(a.end - a.start == 5.0);
        CHECK(s->device_of[a.act.stage] == 3 - s->device_of[b.act.stage]);
        ++pairs;
      }
  CHECK(pairs == 4);

  schedule broken = *s;
  program& rank0 = broken.programs[0];
  for (std::size_t i = 0; i + 1 < rank0.size(); ++i)
    if (rank0[i].kind == action_kind::reduce && rank0[i].stage == 0) {
      rank0.erase(rank0.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  const status ok = validate(broken);
  REQUIRE_FALSE(ok.ok());
  CHECK(ok.message().find("0STEP") != std::string::npos);
}

TEST_CASE("dualpipe's costs may name each stage of the model once, for both of its copies",
          "[runtime]") {
  // p entries (one per stage of the model) simulate as the 2p entries that repeat them per route.
  auto s = dualpipe(params(4, 8));
  REQUIRE(s.ok());
  const schedule lowered = lower_communication(*s);
  cost_model per_stage = uniform_costs(1.0, 2.0, 1.0);
  per_stage.stages.clear();
  for (int k = 0; k < 4; ++k) {
    stage_cost c;
    c.forward = 1.0 + k;
    c.backward = 2.0 + k;
    c.weight_grad = 1.0;
    per_stage.stages.push_back(c);
  }
  cost_model per_copy = per_stage;
  for (int k = 0; k < 4; ++k) per_copy.stages.push_back(per_stage.stages[static_cast<std::size_t>(k)]);
  CHECK(per_stage.check(8, 4, 1, 4).ok());
  CHECK(per_stage.check(8, 4, 1).message().find("give 1 (for all) or 8") != std::string::npos);
  auto a = simulate(lowered, per_stage);
  auto b = simulate(lowered, per_copy);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->makespan == b->makespan);
  CHECK(a->makespan > 0);
}
