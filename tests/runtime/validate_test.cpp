// Tests for runtime/validate.cpp: every built-in generator passes over the grid, and hand-written
// bad programs fail with the right reason.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedule_text.hpp"

using namespace pipeworks;

namespace {

using test::from_text;
using test::problem;

// Where the generator of `kind` permits (p, m, v, w), stated for each schedule; the grid checks
// that the generator builds exactly there.
bool permitted(schedule_kind kind, int p, int m, int v, int w) {
  switch (kind) {
    case schedule_kind::interleaved: return v == 1 || m % p == 0;
    case schedule_kind::bfs: return true;
    case schedule_kind::gpipe:
    case schedule_kind::one_f_one_b:
    case schedule_kind::zb_h1:
    case schedule_kind::zb_h2:
    case schedule_kind::pipedream:
    case schedule_kind::pipedream_vs: return v == 1;
    case schedule_kind::two_bw: return v == 1 && m >= p;
    case schedule_kind::cyclic: return v == 1 && (m + w - 1) / w >= p - 1;  // ceil(m/w) >= p-1
  }
  return false;
}

}  // namespace

TEST_CASE("validator accepts every built-in generator over the grid", "[runtime]") {
  const std::vector<schedule_kind> kinds = {
      schedule_kind::gpipe,     schedule_kind::one_f_one_b,  schedule_kind::interleaved,
      schedule_kind::zb_h1,     schedule_kind::zb_h2,        schedule_kind::bfs,
      schedule_kind::pipedream, schedule_kind::pipedream_vs, schedule_kind::two_bw,
      schedule_kind::cyclic};
  int validated = 0;
  for (schedule_kind kind : kinds)
    for (int steps : {1, 3})
      for (int p = 1; p <= 8; ++p)
        for (int m = 1; m <= 3 * p; ++m)
          for (int v = 1; v <= 3; ++v)
            for (int w = 1; w <= 2; ++w) {
              INFO(schedule_name(kind) << " p=" << p << " m=" << m << " v=" << v << " w=" << w
                                       << " steps=" << steps);
              auto s = make_schedule(kind, {p, m, v, w, steps});
              REQUIRE(s.ok() == permitted(kind, p, m, v, w));
              if (!s.ok()) {
                CHECK_FALSE(s.message().empty());
                continue;
              }
              CHECK(s->ranks() == p * w);
              CHECK(static_cast<int>(s->versions.size()) == s->virtual_stages);
              CHECK_FALSE(s->version_rule.empty());
              const status compute = validate(*s);
              CHECK(compute.message() == "");
              const status lowered = validate(lower_communication(*s));
              CHECK(lowered.message() == "");
              ++validated;
            }
  CHECK(validated > 4000);
}

TEST_CASE("validator accepts small hand-written programs", "[runtime]") {
  CHECK(problem(from_text({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2)) == "ok");
  // Compute-only programs across devices wait on the other rank directly.
  CHECK(problem(from_text({"0F0 0B0", "1F0 1B0"}, 2, 1, 1, false)) == "ok");
  // Split backward: I then W.
  CHECK(problem(from_text({"0F0 0I0 0W0"}, 1)) == "ok");
}

TEST_CASE("validator reports a deadlock as a step x rank grid", "[runtime]") {
  // Both ranks receive before they send: each waits for the other.
  const schedule s = from_text({"0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0RECV_B1 0B1",
                                "1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F0 1F0 1B0 1SEND_B0"},
                               2);
  const std::string msg = problem(s);
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("deadlock: 2 of 2 ranks"));
  CHECK_THAT(msg, Catch::Contains("rank 0"));
  CHECK_THAT(msg, Catch::Contains("[0RECV_B0]"));
  CHECK_THAT(msg, Catch::Contains("[1RECV_F1]"));
  CHECK_THAT(msg, Catch::Contains("<-- stuck"));
  CHECK_THAT(msg, Catch::Contains("rank 1 waits at 1RECV_F1 for 0SEND_F1 on rank 0"));
}

TEST_CASE("validator reports a compute-only deadlock", "[runtime]") {
  const schedule s = from_text({"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"}, 2, 1, 1, false);
  const std::string msg = problem(s);
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("deadlock"));
  CHECK_THAT(msg, Catch::Contains("[0B0]"));
  CHECK_THAT(msg, Catch::Contains("[1F1]"));
}

TEST_CASE("validator reports a REDUCE that one replica never reaches", "[runtime]") {
  const schedule s = from_text({"0F0 0B0 0REDUCE 0STEP", "0F0 0B0 0STEP"}, 1, 1, 2);
  const std::string msg = problem(s);
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("deadlock: 1 of 2"));
  CHECK_THAT(msg, Catch::Contains("[0REDUCE]"));
  CHECK_THAT(msg, Catch::Contains("other replicas of stage 0"));
}

TEST_CASE("validator reports unmatched sends and receives", "[runtime]") {
  CHECK_THAT(problem(from_text({"0F0 0SEND_F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"},
                               2)),
             Catch::Contains("more than once"));
  // The send exists but the receiver has none: the F has no RECV before it.
  CHECK_THAT(problem(from_text({"0F0 0SEND_F0 0RECV_B0 0B0", "1F0 1B0 1SEND_B0"}, 2)),
             Catch::Contains("has no 1RECV_F0 before it"));
  // A receive nobody sends.
  CHECK_THAT(problem(from_text({"0F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2)),
             Catch::Contains("unmatched receive: 1RECV_F0 on rank 1 waits for 0SEND_F0"));
  // A send nobody receives.
  CHECK_THAT(problem(from_text({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0 1SEND_B0"},
                               2)),
             Catch::Contains("more than once"));
  // Stage 1 never takes microbatch 1, which stage 0 sends it.
  CHECK_THAT(problem(from_text({"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                "1RECV_F0 1F0 1B0 1SEND_B0"},
                               2)),
             Catch::Contains("unmatched send: 0SEND_F1 on rank 0 has no 1RECV_F1 on rank 1"));
}

TEST_CASE("validator reports a B before its F", "[runtime]") {
  CHECK_THAT(problem(from_text({"0B0 0F0"}, 1)), Catch::Contains("a B before its F"));
  CHECK_THAT(problem(from_text({"0I0 0F0 0W0"}, 1)), Catch::Contains("a I before its F"));
}

TEST_CASE("validator reports a W before its I", "[runtime]") {
  CHECK_THAT(problem(from_text({"0F0 0W0 0I0"}, 1)), Catch::Contains("a W before its I"));
  CHECK_THAT(problem(from_text({"0F0 0B0 0W0"}, 1)), Catch::Contains("drop the W"));
  CHECK_THAT(problem(from_text({"0F0 0I0"}, 1)), Catch::Contains("has no 0W0"));
}

TEST_CASE("validator reports microbatches never consumed or missing a stage", "[runtime]") {
  // F without backward.
  CHECK_THAT(problem(from_text({"0F0 0F1 0B0"}, 1)),
             Catch::Contains("microbatch 1 is never consumed on stage 0"));
  // Stage 1 never sees microbatch 1.
  CHECK_THAT(problem(from_text({"0F0 0F1 0B0 0B1", "1F0 1B0"}, 2, 1, 1, false)),
             Catch::Contains("microbatch 1 never runs on stage 1"));
}

TEST_CASE("validator reports actions in the wrong place", "[runtime]") {
  CHECK_THAT(problem(from_text({"1F0 1B0", "0F0 0B0"}, 2, 1, 1, false)),
             Catch::Contains("stage 1 runs on device 1"));
  CHECK_THAT(problem(from_text({"0F0 0B0 0F1 0B1 2F0"}, 1)), Catch::Contains("does not exist"));
  CHECK_THAT(problem(from_text({"0F0 0F0 0B0"}, 1)), Catch::Contains("more than once"));
  CHECK_THAT(problem(from_text({"0SEND_F0 0F0 0B0", "1RECV_F0 1F0 1B0"}, 2)),
             Catch::Contains("comes before 0F0"));
  // Same-device chunks: stage 1 cannot run before stage 0 on one device.
  CHECK_THAT(problem(from_text({"1F0 0F0 1B0 0B0"}, 1, 2)), Catch::Contains("comes before 0F0"));
}

// Linearity is measured in bench/bench_simulator.cpp; this only checks a large schedule passes.
TEST_CASE("validator accepts a large lowered 1F1B schedule (p=64, m=256)", "[runtime]") {
  auto s = one_f_one_b({64, 256, 1, 1, 1});
  REQUIRE(s.ok());
  CHECK(validate(lower_communication(*s)).ok());
}
