// Tests for the zero-bubble generators ZB-H1 and ZB-H2: the paper's Figure 3 orders, in-flight
// bounds, version tables, replication and parameter errors.
#include <catch2/catch.hpp>

#include <algorithm>

#include "runtime/schedule.hpp"
#include "tests/runtime/schedules/schedule_test_util.hpp"

using namespace pipeworks;

using pipeworks::test::params;
using pipeworks::test::peak_stashed;

TEST_CASE("zb-h1 reproduces Figure 3 (top) of the zero-bubble paper at p=4, m=8", "[runtime]") {
  auto s = zero_bubble_h1(params(4, 8));
  REQUIRE(s.ok());
  // The paper numbers microbatches from 1 and calls the input-gradient pass B; here it is I.
  CHECK(to_string(s->programs[0]) ==
        "0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1 0W1 0F5 0I2 0W2 0F6 0I3 0W3 0F7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7 0STEP");
  CHECK(to_string(s->programs[1]) ==
        "1F0 1F1 1F2 1I0 1F3 1I1 1W0 1F4 1I2 1W1 1F5 1I3 1W2 1F6 1I4 1W3 1F7 1I5 1W4 1I6 1W5 1I7 1W6 1W7 1STEP");
  CHECK(to_string(s->programs[3]) ==
        "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3F6 3I6 3W3 3F7 3I7 3W4 3W5 3W6 3W7 3STEP");
}

TEST_CASE("zb-h2 reproduces Figure 3 (bottom) of the zero-bubble paper at p=4, m=8", "[runtime]") {
  auto s = zero_bubble_h2(params(4, 8));
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) ==
        "0F0 0F1 0F2 0F3 0F4 0F5 0F6 0I0 0W0 0F7 0I1 0W1 0I2 0W2 0I3 0W3 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7 0STEP");
  CHECK(to_string(s->programs[1]) ==
        "1F0 1F1 1F2 1F3 1F4 1I0 1F5 1I1 1F6 1I2 1W0 1F7 1I3 1W1 1I4 1W2 1I5 1W3 1I6 1W4 1I7 1W5 1W6 1W7 1STEP");
  CHECK(to_string(s->programs[2]) ==
        "2F0 2F1 2F2 2I0 2F3 2I1 2F4 2I2 2F5 2I3 2F6 2I4 2W0 2F7 2I5 2W1 2I6 2W2 2I7 2W3 2W4 2W5 2W6 2W7 2STEP");
  CHECK(to_string(s->programs[3]) ==
        "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3F4 3I4 3F5 3I5 3F6 3I6 3W0 3F7 3I7 3W1 3W2 3W3 3W4 3W5 3W6 3W7 3STEP");
}

TEST_CASE("zero-bubble programs run every F, I and W once per microbatch, in order per microbatch",
          "[runtime]") {
  for (auto gen : {zero_bubble_h1, zero_bubble_h2}) {
    for (int p : {1, 2, 3, 5, 8}) {
      for (int m : {1, 2, p, 2 * p - 1, 3 * p + 1}) {
        auto s = gen(params(p, m, 2));
        REQUIRE(s.ok());
        REQUIRE(s->ranks() == p);
        for (int d = 0; d < p; ++d) {
          std::vector<int> f(2 * m, 0), i(2 * m, 0), w(2 * m, 0);
          int steps = 0;
          for (const action& a : s->programs[d]) {
            CHECK(a.stage == d);
            if (a.kind == action_kind::step) { ++steps; continue; }
            REQUIRE(a.microbatch >= 0);
            REQUIRE(a.microbatch < 2 * m);
            CHECK(a.microbatch / m == steps);  // every action of step t comes before STEP t
            if (a.kind == action_kind::forward) ++f[a.microbatch];
            if (a.kind == action_kind::input_grad) { CHECK(f[a.microbatch] == 1); ++i[a.microbatch]; }
            if (a.kind == action_kind::weight_grad) { CHECK(i[a.microbatch] == 1); ++w[a.microbatch]; }
            CHECK(a.kind != action_kind::backward);
          }
          CHECK(steps == 2);
          for (int k = 0; k < 2 * m; ++k) CHECK((f[k] == 1 && i[k] == 1 && w[k] == 1));
        }
      }
    }
  }
}

TEST_CASE("zb-h1 keeps 1F1B's p in flight per stage and zb-h2 holds 2p-1 on the last stage", "[runtime]") {
  for (int p : {1, 2, 4, 7}) {
    const int m = 3 * p;
    auto h1 = zero_bubble_h1(params(p, m));
    auto h2 = zero_bubble_h2(params(p, m));
    REQUIRE(h1.ok());
    REQUIRE(h2.ok());
    for (int d = 0; d < p; ++d) {
      CHECK(peak_stashed(h1->programs[d]) == p);          // (p - i + 1) M_B + (i - 1) M_W in the paper
      CHECK(peak_stashed(h2->programs[d]) == 2 * p - 1);  // (2p - 2i + 1) M_B + (2i - 2) M_W
    }
  }
}

TEST_CASE("zero-bubble schedules are synchronous and replicate with a REDUCE before each STEP",
          "[runtime]") {
  auto s = zero_bubble_h2(params(3, 4, 2, 2));
  REQUIRE(s.ok());
  REQUIRE(s->ranks() == 6);
  REQUIRE(s->versions.size() == 3);
  for (const auto& row : s->versions) {
    REQUIRE(row.size() == 8);
    for (int mb = 0; mb < 8; ++mb) CHECK((row[mb].forward == mb / 4 && row[mb].backward == mb / 4));
  }
  for (int d = 0; d < 3; ++d) {
    CHECK(s->programs[s->rank_of(1, d)] == s->programs[d]);
    const program& prog = s->programs[d];
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (prog[i].kind == action_kind::step) {
        REQUIRE(i > 0);
        CHECK(prog[i - 1].kind == action_kind::reduce);
      }
    }
  }
  auto single = zero_bubble_h1(params(3, 4, 1, 1));
  REQUIRE(single.ok());
  for (const action& a : single->programs[0]) CHECK(a.kind != action_kind::reduce);
  CHECK(single->kind == schedule_kind::zb_h1);
  CHECK(!single->version_rule.empty());
}

TEST_CASE("zero-bubble generators reject parameters they do not permit, saying what would work",
          "[runtime]") {
  schedule_params chunks = params(4, 8);
  chunks.chunks = 2;
  auto a = zero_bubble_h1(chunks);
  REQUIRE(!a.ok());
  CHECK_THAT(a.message(), Catch::Contains("zb-h1") && Catch::Contains("interleaved"));
  auto b = zero_bubble_h2(params(0, 8));
  REQUIRE(!b.ok());
  CHECK_THAT(b.message(), Catch::Contains("zb-h2") && Catch::Contains("at least 1"));
  auto c = make_schedule(schedule_kind::zb_h2, params(4, 0));
  REQUIRE(!c.ok());
  CHECK_THAT(c.message(), Catch::Contains("microbatch"));
}
