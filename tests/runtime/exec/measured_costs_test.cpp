// Tests for costs_from_timeline: means per stage and kind from a hand-made timeline, split
// backwards, missing kinds, OVERLAP_F_B pairs, and a simulated run's timeline giving back the
// costs it ran with.
#include "runtime/exec/measured_costs.hpp"

#include <catch2/catch.hpp>

#include "runtime/simulate.hpp"

using namespace pipeworks;

namespace {

schedule make(schedule_kind kind, int p, int m, int w = 1) {
  auto s = make_schedule(kind, schedule_params{p, m, 1, w, 1});
  REQUIRE(s.ok());
  return std::move(*s);
}

timeline_event ev(int rank, int stage, action_kind kind, int mb, double start, double end,
                  stream_kind stream = stream_kind::compute) {
  return timeline_event{rank, stream, action{stage, kind, mb}, start, end};
}

}  // namespace

TEST_CASE("costs_from_timeline takes per-stage means of F, B and STEP", "[runtime]") {
  const schedule plan = make(schedule_kind::one_f_one_b, 2, 2, 2);
  timeline t;
  t.ranks = 4;
  t.devices_per_replica = 2;
  t.events = {
      ev(0, 0, action_kind::forward, 0, 0.0, 1.0),
      ev(2, 0, action_kind::forward, 0, 0.0, 3.0),  // replica 1 counts too
      ev(0, 0, action_kind::backward, 0, 5.0, 9.0),
      ev(0, 0, action_kind::step, -1, 9.0, 9.5),
      ev(1, 1, action_kind::forward, 0, 1.0, 2.0),
      ev(1, 1, action_kind::backward, 0, 2.0, 4.0),
      ev(1, 1, action_kind::backward, 1, 4.0, 8.0),
      // Not compute: ignored.
      ev(0, 0, action_kind::send_f, 0, 1.0, 50.0, stream_kind::send),
      ev(1, 1, action_kind::recv_f, 0, 0.0, 50.0, stream_kind::recv),
      // REDUCE is free in the replay, and a stage outside the plan is ignored.
      ev(0, 0, action_kind::reduce, -1, 8.0, 20.0),
      ev(0, 7, action_kind::forward, 0, 0.0, 100.0),
  };
  const cost_model c = costs_from_timeline(t, plan);
  REQUIRE(c.stages.size() == 2);
  REQUIRE(c.stage(0).forward == 2.0);
  REQUIRE(c.stage(0).backward == 4.0);
  REQUIRE(c.stage(0).weight_grad == 0.0);
  REQUIRE(c.stage(0).step == 0.5);
  REQUIRE(c.stage(0).reduce == 0.0);
  REQUIRE(c.stage(1).forward == 1.0);
  REQUIRE(c.stage(1).backward == 3.0);
  REQUIRE(c.stage(1).step == 0.0);  // no STEP events on stage 1
  REQUIRE(c.link.latency == 0.0);
  REQUIRE(c.stage(0).activation_bytes == 0);
  REQUIRE(c.check(plan.virtual_stages, 2, 2).ok());
}

TEST_CASE("costs_from_timeline adds I and W for a split backward", "[runtime]") {
  const schedule plan = make(schedule_kind::zb_h1, 2, 2);
  timeline t;
  t.events = {
      ev(0, 0, action_kind::input_grad, 0, 0.0, 1.0),
      ev(0, 0, action_kind::input_grad, 1, 1.0, 4.0),   // mean I = 2
      ev(0, 0, action_kind::weight_grad, 0, 4.0, 5.0),  // mean W = 1
      ev(1, 1, action_kind::weight_grad, 0, 0.0, 2.0),  // stage 1: W only
  };
  const cost_model c = costs_from_timeline(t, plan);
  REQUIRE(c.stage(0).backward == 3.0);
  REQUIRE(c.stage(0).weight_grad == 1.0);
  REQUIRE(c.stage(0).input_grad() == 2.0);
  REQUIRE(c.stage(0).forward == 0.0);  // no F events
  REQUIRE(c.stage(1).backward == 2.0);
  REQUIRE(c.stage(1).weight_grad == 2.0);
  REQUIRE(c.check(plan.virtual_stages, 2).ok());
}

TEST_CASE("a simulated timeline gives back the costs it was simulated with", "[runtime]") {
  for (schedule_kind kind : {schedule_kind::one_f_one_b, schedule_kind::zb_h1}) {
    INFO(schedule_name(kind));
    const schedule plan = lower_communication(make(kind, 3, 4));
    cost_model given;
    given.stages.clear();
    for (int s = 0; s < 3; ++s) {
      stage_cost sc;
      sc.forward = 1.0 + s;
      sc.backward = 2.0 + 2 * s;
      sc.weight_grad = kind == schedule_kind::zb_h1 ? 0.5 + s : 0.0;
      sc.step = 0.25;
      given.stages.push_back(sc);
    }
    auto sim = simulate(plan, given);
    REQUIRE(sim.ok());
    const cost_model got = costs_from_timeline(sim->trace, plan);
    for (int s = 0; s < 3; ++s) {
      REQUIRE(got.stage(s).forward == Approx(given.stage(s).forward));
      REQUIRE(got.stage(s).backward == Approx(given.stage(s).backward));
      REQUIRE(got.stage(s).weight_grad == Approx(given.stage(s).weight_grad));
      REQUIRE(got.stage(s).step == Approx(given.stage(s).step));
    }
    auto again = simulate(plan, got);
    REQUIRE(again.ok());
    REQUIRE(again->makespan == Approx(sim->makespan));
  }
}

TEST_CASE("costs_from_timeline takes an overlapped pair's time only where a stage has no other", "[runtime]") {
  const schedule plan = make(schedule_kind::one_f_one_b, 2, 2);
  timeline t;
  t.ranks = 2;
  t.devices_per_replica = 2;
  t.events = {
      ev(0, 0, action_kind::forward, 0, 0.0, 1.0),
      ev(0, 0, action_kind::backward, 0, 10.0, 12.0),
      // A pair on rank 0: F of microbatch 1 and B of microbatch 0's stage 0 again, one time 5..9.
      ev(0, 0, action_kind::forward, 1, 5.0, 9.0),
      ev(0, 0, action_kind::backward, 1, 5.0, 9.0),
      // Stage 1 ran its F only in a pair: the pair's time is all there is.
      ev(1, 1, action_kind::forward, 0, 2.0, 5.0),
      ev(1, 1, action_kind::backward, 1, 2.0, 5.0),
  };
  const cost_model c = costs_from_timeline(t, plan);
  REQUIRE(c.stages.size() == 2);
  CHECK(c.stages[0].forward == Approx(1.0));
  CHECK(c.stages[0].backward == Approx(2.0));
  CHECK(c.stages[1].forward == Approx(3.0));
  CHECK(c.stages[1].backward == Approx(3.0));
}
