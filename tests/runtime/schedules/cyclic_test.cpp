// Tests for runtime/schedules/cyclic.cpp: cyclic data parallelism on a pipeline.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/invariants.hpp"

using namespace pipeworks;
using namespace pipeworks::testing;

TEST_CASE("cyclic: the first p-1 microbatches of a step use t-1, the rest t", "[runtime]") {
  const int p = 3, m = 4;
  auto s = cyclic({p, m, 1, 1, 3});
  REQUIRE(s.ok());
  for (int st = 0; st < p; ++st)
    for (int mb = 0; mb < s->total_microbatches(); ++mb) {
      const int t = mb / m, k = mb % m;
      const int expected = t == 0 ? 0 : (k < p - 1 ? t - 1 : t);
      INFO("stage " << st << " microbatch " << mb);
      CHECK(s->versions[st][mb].forward == expected);
      CHECK(s->versions[st][mb].backward == expected);
    }
  CHECK(s->version_rule.find("t-1") != std::string::npos);
}

TEST_CASE("cyclic: constant in-flight microbatches, versions exist, at most two live",
          "[runtime]") {
  for (int p : {1, 2, 4})
    for (int m : {std::max(p - 1, 1), p, 2 * p}) {
      auto s = cyclic({p, m, 1, 1, 4});
      REQUIRE(s.ok());
      check_complete(*s);
      for (int st = 0; st < p; ++st) {
        INFO("p=" << p << " m=" << m << " stage " << st);
        CHECK(peak_live_versions(*s, st) <= 2);
        int in_flight = 0, peak = 0;
        for (const action& a : stage_actions(*s, st)) {
          in_flight += a.kind == action_kind::forward ? 1 : -1;
          peak = std::max(peak, in_flight);
        }
        CHECK(peak == std::min(p - st, s->total_microbatches()));
      }
      CHECK(validate(lower_communication(*s)).ok());
    }
}

TEST_CASE("cyclic needs m >= p - 1", "[runtime]") {
  auto bad = cyclic({5, 3, 1, 1, 2});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("m >= 4"));
}
