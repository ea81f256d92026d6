// Tests for runtime/lower.cpp: SEND/RECV pairs between stages on different devices only.
#include "runtime/lower.hpp"

#include <catch2/catch.hpp>
#include <vector>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"

using namespace pipeworks;

TEST_CASE("lowering 1F1B p=2 m=2 adds sends after producers and receives before consumers",
          "[runtime]") {
  auto s = one_f_one_b({2, 2, 1, 1, 1});
  REQUIRE(s.ok());
  const schedule l = lower_communication(*s);
  CHECK(l.lowered);
  CHECK(to_string(l.programs[0]) == "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0STEP");
  CHECK(to_string(l.programs[1]) == "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1STEP");
  CHECK(validate(l).ok());
}

TEST_CASE("lowering needs no messages on one device", "[runtime]") {
  auto s = interleaved({1, 2, 3, 1, 1});
  REQUIRE(s.ok());
  const schedule l = lower_communication(*s);
  CHECK(l.programs[0] == s->programs[0]);
  CHECK(validate(l).ok());
}

TEST_CASE("lowering interleaved chunks: every hand-off crosses devices when p > 1", "[runtime]") {
  auto s = interleaved({2, 2, 2, 1, 1});
  REQUIRE(s.ok());
  const schedule l = lower_communication(*s);
  int sends = 0, recvs = 0;
  for (const auto& prog : l.programs)
    for (const auto& a : prog) {
      sends += a.kind == action_kind::send_f || a.kind == action_kind::send_b;
      recvs += a.kind == action_kind::recv_f || a.kind == action_kind::recv_b;
    }
  // 4 virtual stages, 3 boundaries, 2 microbatches, forward and backward.
  CHECK(sends == 3 * 2 * 2);
  CHECK(recvs == sends);
  CHECK(validate(l).ok());
}

TEST_CASE("lowering split backwards: I sends the input gradient, W sends nothing", "[runtime]") {
  auto s = schedule_from_programs(
      {parse_program("0F0 0I0 0W0").value(), parse_program("1F0 1I0 1W0").value()}, 2, 1, 1, false);
  REQUIRE(s.ok());
  const schedule l = lower_communication(*s);
  CHECK(to_string(l.programs[0]) == "0F0 0SEND_F0 0RECV_B0 0I0 0W0");
  CHECK(to_string(l.programs[1]) == "1RECV_F0 1F0 1I0 1SEND_B0 1W0");
  CHECK(validate(l).ok());
}

TEST_CASE("lowering keeps REDUCE and STEP in place", "[runtime]") {
  auto s = gpipe({2, 1, 1, 2, 1});
  REQUIRE(s.ok());
  const schedule l = lower_communication(*s);
  CHECK(to_string(l.programs[2]) == "0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE 0STEP");
  CHECK(validate(l).ok());
}

TEST_CASE("lowering by value gives the same programs and grows them in place", "[runtime]") {
  for (auto k : every_schedule_kind()) {
    CAPTURE(schedule_name(k));
    auto s = make_schedule(k, {4, 8, k == schedule_kind::interleaved || k == schedule_kind::bfs
                                          ? 2 : default_chunks(k), 2, 2});
    REQUIRE(s.ok());
    const schedule copied = lower_communication(*s);  // the const& form leaves *s alone
    CHECK_FALSE(s->lowered);
    // The generators reserve room for the SEND/RECV pairs: lowering moves no program.
    std::vector<const action*> before;
    for (const program& prog : s->programs) before.push_back(prog.data());
    const schedule moved = lower_communication(std::move(*s));
    CHECK(moved.lowered);
    REQUIRE(moved.programs.size() == copied.programs.size());
    for (std::size_t r = 0; r < moved.programs.size(); ++r) {
      CHECK(moved.programs[r] == copied.programs[r]);
      CHECK(moved.programs[r].data() == before[r]);
    }
    CHECK(validate(moved).ok());
  }
}
