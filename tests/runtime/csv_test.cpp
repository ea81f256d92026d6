// Tests for runtime/csv.cpp: CSV export and import in PyTorch's pipelining format.
#include <catch2/catch.hpp>

#include "runtime/schedule.hpp"

using namespace pipeworks;

TEST_CASE("CSV export writes one row per rank of action strings", "[runtime]") {
  auto s = one_f_one_b({2, 2, 1, 1, 1});
  REQUIRE(s.ok());
  CHECK(to_csv(*s) == "0F0,0F1,0B0,0B1,0STEP\n1F0,1B0,1F1,1B1,1STEP\n");
}

TEST_CASE("CSV round trip of lowered schedules", "[runtime]") {
  for (schedule_kind kind : {schedule_kind::gpipe, schedule_kind::interleaved,
                             schedule_kind::pipedream, schedule_kind::bfs, schedule_kind::zbv,
                             schedule_kind::dualpipev}) {
    const int v = kind == schedule_kind::interleaved || kind == schedule_kind::bfs
                      ? 2
                      : default_chunks(kind);
    auto s = make_schedule(kind, {3, 6, v, 2, 2});
    REQUIRE(s.ok());
    const schedule l = lower_communication(*s);
    auto back = parse_csv(to_csv(l));
    REQUIRE(back.ok());
    CHECK(*back == l.programs);
  }
  // An OVERLAP_F_B pair is one cell, as PyTorch writes it.
  auto d = make_schedule(schedule_kind::dualpipev, {2, 4, 2, 1, 1});
  REQUIRE(d.ok());
  CHECK(to_csv(*d).find(",(0F3;3B1)OVERLAP_F_B,") != std::string::npos);
}

TEST_CASE("CSV import reads what Python's csv.writer writes", "[runtime]") {
  // csv.writer ends rows with \r\n and writes None (an idle slot) as an empty cell.
  auto rows = parse_csv("0F0,,0F1,0B0,0B1\r\n,1F0,1B0,1F1,1B1\r\n");
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 2);
  CHECK(to_string((*rows)[0]) == "0F0 0F1 0B0 0B1");
  CHECK(to_string((*rows)[1]) == "1F0 1B0 1F1 1B1");
  auto quoted = parse_csv("\"0F0\", 0B0\n1REDUCE_GRAD");
  REQUIRE(quoted.ok());
  CHECK(to_string((*quoted)[0]) == "0F0 0B0");
  CHECK(to_string((*quoted)[1]) == "1REDUCE");
  // A blank line between rows is an empty rank; a row of empty cells too.
  auto empty_rank = parse_csv("0F0,0B0\n\n2F0,2B0\n");
  REQUIRE(empty_rank.ok());
  REQUIRE(empty_rank->size() == 3);
  CHECK((*empty_rank)[1].empty());
  auto idle_last = parse_csv("0F0,0B0\n,,\n");
  REQUIRE(idle_last.ok());
  CHECK(idle_last->size() == 2);
}

TEST_CASE("CSV import drops trailing blank lines", "[runtime]") {
  for (const char* text : {"0F0,0B0\n1F0,1B0\n\n", "0F0,0B0\n1F0,1B0\n\n\n",
                           "0F0,0B0\r\n1F0,1B0\r\n\r\n", "0F0,0B0\n1F0,1B0\n  \n"}) {
    auto rows = parse_csv(text);
    REQUIRE(rows.ok());
    CHECK(rows->size() == 2);
    CHECK(to_string(rows->back()) == "1F0 1B0");
  }
}

TEST_CASE("CSV import of huge microbatch ids fails cleanly in schedule_from_programs",
          "[runtime]") {
  for (const char* text : {"0F2000000000,0B2000000000", "0F2147483647,0B2147483647\n"}) {
    auto rows = parse_csv(text);
    REQUIRE(rows.ok());
    auto s = schedule_from_programs(*rows, 1);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains("(rank 0, action 0) names microbatch"));
    CHECK_THAT(s.message(), Catch::Contains("ids must lie in 0..1"));
  }
}

TEST_CASE("CSV import names the line and column of a bad cell", "[runtime]") {
  auto bad = parse_csv("0F0,0B0\n1F0,1Z0\n");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("line 2, column 2"));
  CHECK_THAT(bad.message(), Catch::Contains("unknown kind"));
}
