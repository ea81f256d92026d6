// Tests for runtime/schedules/cyclic.cpp: cyclic data parallelism, replicas phase-shifted by
// q/w of a cycle, per-stage reductions, two versions by position in the cycle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "runtime/cost_model.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

namespace {

// Position in `prog` of the first action equal to `a`, or prog.size().
std::size_t find_action(const program& prog, const action& a) {
  return static_cast<std::size_t>(std::find(prog.begin(), prog.end(), a) - prog.begin());
}

}  // namespace

TEST_CASE("cyclic: microbatch k of step t uses t-1 before the split, else t", "[runtime]") {
  const int p = 3, m = 4;
  for (int w : {1, 2}) {
    auto s = cyclic({p, m, 1, w, 3});
    REQUIRE(s.ok());
    const int split = std::min(m, p - 1 + (w - 1) * m / w);  // 2, then 4
    CHECK(cyclic_version_split(s->params) == split);
    for (int st = 0; st < p; ++st)
      for (int mb = 0; mb < s->total_microbatches(); ++mb) {
        const int t = mb / m, k = mb % m;
        INFO("w=" << w << " stage " << st << " microbatch " << mb);
        CHECK(s->versions[st][mb].forward == (t > 0 && k < split ? t - 1 : t));
      }
    // Whatever the formula says, the versions exist and at most two are live.
    check_versions_usable(*s, 1);
    CHECK(s->version_rule.find("t-1") != std::string::npos);
  }
}

TEST_CASE("cyclic: constant in-flight microbatches, versions exist, at most two live",
          "[runtime]") {
  for (int w : {1, 2, 3})
    for (int p : {1, 2, 4})
      for (int m : {std::max(w * (p - 2) + 1, 1), 2 * p, 3 * p}) {
        auto s = cyclic({p, m, 1, w, 4});
        INFO("w=" << w << " p=" << p << " m=" << m);
        REQUIRE(s.ok());
        check_complete(*s);
        check_versions_usable(*s, 1);
        for (int st = 0; st < p; ++st) {
          CHECK(peak_live_versions(*s, st) <= 2);
          for (int q = 0; q < w; ++q) {
            int in_flight = 0, peak = 0;
            for (const action& a : stage_actions(*s, st, q)) {
              in_flight += a.kind == action_kind::forward ? 1 : -1;
              peak = std::max(peak, in_flight);
            }
            CHECK(peak == std::min(p - st, s->total_microbatches()));
          }
        }
        CHECK(validate(*s).message() == "");
        CHECK(validate(lower_communication(*s)).message() == "");
      }
}

TEST_CASE("cyclic differs from pipedream-vs: replica q's update falls q*m/w later", "[runtime]") {
  const int p = 3, m = 4, w = 2;
  auto c = cyclic({p, m, 1, w, 3});
  auto vs = pipedream_vertical_sync({p, m, 1, w, 3});
  REQUIRE(c.ok());
  REQUIRE(vs.ok());
  CHECK(c->programs != vs->programs);
  CHECK(c->versions != vs->versions);
  // Replica 0 is not shifted: its programs are pipedream-vs's.
  for (int d = 0; d < p; ++d) CHECK(c->programs[d] == vs->programs[d]);
  // Replica 1 is shifted by m/2 = 2: its first update of each stage follows B(m - 1 + 2), so
  // the backwards of step 1's microbatches 4 and 5 come before it.
  for (int d = 0; d < p; ++d) {
    const program& prog = c->programs[c->rank_of(1, d)];
    const std::size_t reduce = find_action(prog, action{d, action_kind::reduce, -1});
    CHECK(prog.at(reduce - 1) == (action{d, action_kind::backward, m - 1 + 2}));
    CHECK(find_action(prog, action{d, action_kind::backward, m}) < reduce);
  }
  // With one replica there is nothing to shift: the same programs as pipedream-vs.
  CHECK(cyclic({p, m, 1, 1, 3})->programs == pipedream_vertical_sync({p, m, 1, 1, 3})->programs);
}

TEST_CASE("cyclic simulated with w=2: per-stage reductions at different times, constant "
          "activations", "[runtime]") {
  const int p = 4, m = 8, w = 2, steps = 3;
  auto s = cyclic({p, m, 1, w, steps});
  REQUIRE(s.ok());
  const schedule lowered = lower_communication(*s);
  REQUIRE(validate(lowered).ok());
  auto sim = simulate(lowered, uniform_costs(1.0, 2.0));
  INFO((sim.ok() ? std::string() : sim.message()));
  REQUIRE(sim.ok());
  // End time of the k-th REDUCE of each stage (all replicas end a REDUCE together).
  std::map<int, std::vector<double>> reduce_ends;  // stage -> ends in order, replica 0
  for (const auto& e : sim->trace.events)
    if (e.act.kind == action_kind::reduce && e.rank < p) reduce_ends[e.act.stage].push_back(e.end);
  REQUIRE(static_cast<int>(reduce_ends.size()) == p);
  for (int k = 0; k < steps; ++k) {
    std::set<double> times;
    for (auto& [stage, ends] : reduce_ends) {
      REQUIRE(static_cast<int>(ends.size()) == steps);
      std::sort(ends.begin(), ends.end());
      times.insert(ends[k]);
    }
    INFO("step " << k);
    CHECK(static_cast<int>(times.size()) == p);  // every stage reduces at its own time
  }
  for (int d = 0; d < p; ++d) {
    INFO("device " << d);
    CHECK(sim->stages[d].peak_inflight == p - d);  // as in 1F1B: the shift adds no activations
    CHECK(sim->stages[d].peak_versions <= 2);
  }
}

TEST_CASE("cyclic needs ceil(m / w) >= p - 1", "[runtime]") {
  auto bad = cyclic({5, 3, 1, 1, 2});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("m >= 4"));
  auto bad2 = cyclic({4, 4, 1, 2, 2});
  REQUIRE_FALSE(bad2.ok());
  CHECK_THAT(bad2.message(), Catch::Contains("Use m >= 5 (or fewer replicas)"));
  CHECK(cyclic({4, 5, 1, 2, 2}).ok());
}

// The point-to-point reduce: the same computations and REDUCEs; the last replica steps right
// after its REDUCE, the others just before their first F that uses the new version.
TEST_CASE("cyclic p2p: the last replica steps at its REDUCE, the others where they need it",
          "[runtime]") {
  for (int w : {2, 3, 4})
    for (int p : {1, 2, 3, 4})
      for (int m : {std::max(w * (p - 2) + 1, 1), 2 * p + 1}) {
        INFO("w=" << w << " p=" << p << " m=" << m);
        auto chain = cyclic({p, m, 1, w, 4, reduce_mode::p2p});
        auto all = cyclic({p, m, 1, w, 4});
        REQUIRE(chain.ok());
        REQUIRE(all.ok());
        CHECK(chain->versions == all->versions);
        REQUIRE(validate(*chain).ok());
        check_complete(*chain);
        check_versions_usable(*chain, 1);
        for (int q = 0; q < w; ++q)
          for (int d = 0; d < p; ++d) {
            const program& mine = chain->programs[chain->rank_of(q, d)];
            const program& theirs = all->programs[all->rank_of(q, d)];
            auto no_steps = [](program x) {
              std::erase_if(x, [](const action& a) { return a.kind == action_kind::step; });
              return x;
            };
            CHECK(no_steps(mine) == no_steps(theirs));
            if (q == w - 1) {
              CHECK(mine == theirs);
              continue;
            }
            // Each STEP t (t = 0, 1, ...) comes after REDUCE t, and right before the first F
            // that uses version t + 1, or before REDUCE t + 1 when that comes first, or at the end.
            int t = 0, reduces = 0;
            for (std::size_t i = 0; i < mine.size(); ++i) {
              if (mine[i].kind == action_kind::reduce) ++reduces;
              if (mine[i].kind != action_kind::step) continue;
              CHECK(reduces == t + 1);
              if (i + 1 < mine.size() && mine[i + 1].kind != action_kind::reduce) {
                REQUIRE(mine[i + 1].kind == action_kind::forward);
                CHECK(chain->versions[d][mine[i + 1].microbatch].forward == t + 1);
              }
              for (std::size_t j = 0; j < i; ++j)
                if (mine[j].kind == action_kind::forward)
                  CHECK(chain->versions[d][mine[j].microbatch].forward <= t);
              ++t;
            }
            CHECK(t == 4);
          }
      }
}

TEST_CASE("the p2p reduce is refused for schedules other than cyclic and for one replica",
          "[runtime]") {
  auto other = make_schedule(schedule_kind::one_f_one_b, {2, 4, 1, 2, 1, reduce_mode::p2p});
  REQUIRE_FALSE(other.ok());
  CHECK(other.message().find("cyclic") != std::string::npos);
  auto alone = make_schedule(schedule_kind::cyclic, {2, 4, 1, 1, 1, reduce_mode::p2p});
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.message().find("2 replicas") != std::string::npos);
}

// Without the REDUCE barrier the replicas do not wait for the furthest-shifted one: with free
// communication each replica runs as a lone pipeline does, and the makespan is pipedream-vs's.
TEST_CASE("cyclic p2p: with free links the replicas run as fast as one alone", "[runtime]") {
  for (int w : {2, 4})
    for (int p : {2, 4}) {
      const int m = 3 * p * w;
      INFO("w=" << w << " p=" << p << " m=" << m);
      auto chain = make_schedule(schedule_kind::cyclic, {p, m, 1, w, 3, reduce_mode::p2p});
      auto all = make_schedule(schedule_kind::cyclic, {p, m, 1, w, 3});
      auto alone = make_schedule(schedule_kind::pipedream_vs, {p, m, 1, 1, 3});
      REQUIRE(chain.ok());
      REQUIRE(all.ok());
      REQUIRE(alone.ok());
      const cost_model costs = uniform_costs(1.0, 2.0, 1.0);
      auto a = simulate(lower_communication(*chain), costs);
      auto b = simulate(lower_communication(*all), costs);
      auto c = simulate(lower_communication(*alone), costs);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(c.ok());
      CHECK(a->makespan == c->makespan);
      CHECK(b->makespan > a->makespan);  // the collective waits for the last replica once
      // The REDUCE barrier's wait: replica 0 idles for the last one's shift, floor((w-1)m/w)
      // microbatches, each an F and a B (3 time units) on the pipeline's slowest device.
      CHECK(b->makespan - a->makespan == Approx(3.0 * ((w - 1) * m / w)));
    }
}

// A hop costs one whole gradient on the reduce link: the last replica's REDUCE ends one hop
// after the previous one's, which ends a hop after it began.
TEST_CASE("cyclic p2p: a partial sum and a version take one hop each", "[runtime]") {
  auto chain = make_schedule(schedule_kind::cyclic, {1, 2, 1, 2, 1, reduce_mode::p2p});
  REQUIRE(chain.ok());
  cost_model costs = uniform_costs(1.0, 2.0, 1.0);
  costs.stages[0].param_bytes = 1000;
  costs.reduce_link = {0.5, 1000.0};  // 1 s transfer, 0.5 s latency
  simulate_options o;
  o.record_timeline = true;
  auto sim = simulate(lower_communication(*chain), costs, o);
  REQUIRE(sim.ok());
  std::map<int, std::pair<double, double>> reduce_of, step_of;  // by rank: start, end
  for (const timeline_event& e : sim->trace.events) {
    if (e.act.kind == action_kind::reduce) reduce_of[e.rank] = {e.start, e.end};
    if (e.act.kind == action_kind::step) step_of[e.rank] = {e.start, e.end};
  }
  REQUIRE(reduce_of.size() == 2);
  // Replica 0: F0 B0 F1 B1 (6 s, no shift) then its REDUCE sends for 1.5 s (transfer, latency).
  CHECK(reduce_of[0].first == Approx(6.0));
  CHECK(reduce_of[0].second == Approx(7.5));
  // Replica 1 closes at the same time (m = 2, w = 2: shift 1, but one step only) and waits.
  CHECK(reduce_of[1].second == Approx(7.5));
  // Replica 0 takes the version a hop after replica 1's STEP.
  CHECK(step_of[0].first == Approx(step_of[1].second + 1.5));
}
