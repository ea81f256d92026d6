// Tests for runtime/schedules/cyclic.cpp: cyclic data parallelism, replicas phase-shifted by
// q/w of a cycle, per-stage reductions, two versions by position in the cycle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "runtime/cost_model.hpp"
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
