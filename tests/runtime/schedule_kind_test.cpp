// Tests for runtime/schedule_kind.cpp: kind names and make_schedule's dispatch.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"

using namespace pipeworks;

TEST_CASE("schedule kinds print and parse by name", "[runtime]") {
  for (schedule_kind k : every_schedule_kind()) {
    auto back = parse_schedule_kind(schedule_name(k));
    REQUIRE(back.ok());
    CHECK(*back == k);
  }
  CHECK(schedule_name(schedule_kind::one_f_one_b) == "1f1b");
  CHECK(schedule_name(schedule_kind::pipedream_vs) == "pipedream-vs");
  CHECK(schedule_name(schedule_kind::two_bw) == "2bw");
  auto bad = parse_schedule_kind("1F1B");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("known schedules are gpipe, 1f1b"));
}

TEST_CASE("flush schedules are the synchronous ones", "[runtime]") {
  CHECK(is_flush(schedule_kind::gpipe));
  CHECK(is_flush(schedule_kind::interleaved));
  CHECK(is_flush(schedule_kind::bfs));
  CHECK_FALSE(is_flush(schedule_kind::pipedream));
  CHECK_FALSE(is_flush(schedule_kind::two_bw));
  CHECK_FALSE(is_flush(schedule_kind::cyclic));
}

TEST_CASE("make_schedule dispatches to the generator of the kind", "[runtime]") {
  const schedule_params params{2, 4, 1, 1, 2};
  for (schedule_kind k : {schedule_kind::gpipe, schedule_kind::one_f_one_b, schedule_kind::bfs,
                          schedule_kind::pipedream, schedule_kind::pipedream_vs,
                          schedule_kind::two_bw, schedule_kind::cyclic}) {
    auto s = make_schedule(k, params);
    REQUIRE(s.ok());
    CHECK(s->kind == k);
    CHECK(s->params.steps == 2);
  }
  CHECK(make_schedule(schedule_kind::gpipe, params)->programs ==
        gpipe(params)->programs);
}
