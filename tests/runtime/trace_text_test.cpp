// Tests for the text timeline: small hand-built timelines against expected strings, exact and
// quantised.
#include "runtime/trace_text.hpp"

#include <catch2/catch.hpp>

using namespace pipeworks;

namespace {

timeline_event compute(int rank, action_kind k, int mb, double start, double end) {
  return timeline_event{rank, stream_kind::compute, action{rank, k, mb}, start, end, 0, -1};
}

// GPipe on two stages with two microbatches, F = 1 and B = 2.
timeline gpipe_2x2() {
  using k = action_kind;
  timeline t;
  t.title = "gpipe p=2 m=2";
  t.ranks = 2;
  t.devices_per_replica = 2;
  t.events = {
      compute(0, k::forward, 0, 0, 1),
      compute(0, k::forward, 1, 1, 2),
      compute(1, k::forward, 0, 1, 2),
      compute(1, k::forward, 1, 2, 3),
      compute(1, k::backward, 0, 3, 5),
      compute(1, k::backward, 1, 5, 7),
      compute(0, k::backward, 0, 5, 7),
      compute(0, k::backward, 1, 7, 9),
      // Communication is not drawn.
      timeline_event{0, stream_kind::send, action{0, k::send_f, 0}, 1, 1.5, -1, 1},
  };
  return t;
}

const std::string legend =
    "F: A-Z, B/I: a-z (microbatch mod 26), W: +, REDUCE: R, STEP: S, idle: .; 1 column = ";

}  // namespace

TEST_CASE("text timeline draws one column per time unit when it can", "[runtime]") {
  CHECK(to_text(gpipe_2x2()) ==
        "gpipe p=2 m=2\n"
        "rank 0   |AB...aabb|\n"
        "rank 1   |.ABaabb..|\n" +
            legend + "1 (exact), makespan 9\n");
}

TEST_CASE("text timeline quantises long timelines to the width", "[runtime]") {
  // Columns of 3: a column shows the action covering most of it, '.' when mostly idle.
  CHECK(to_text(gpipe_2x2(), 3) ==
        "gpipe p=2 m=2\n"
        "rank 0   |A.b|\n"
        "rank 1   |Aa.|\n" +
            legend + "3, makespan 9\n");
}

TEST_CASE("text timeline marks I, W, REDUCE, STEP and replicas", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 2;
  t.devices_per_replica = 1;  // two replicas of a one-stage pipeline
  t.events = {
      compute(0, k::forward, 27, 0, 1),     compute(0, k::input_grad, 27, 1, 2),
      compute(0, k::weight_grad, 27, 2, 3), compute(0, k::reduce, -1, 3, 4),
      compute(0, k::step, -1, 4, 5),        compute(1, k::forward, 2, 0, 1),
      compute(1, k::step, -1, 4, 5),
  };
  CHECK(to_text(t, 10) ==
        "rank 0   (r0 d0) |Bb+RS|\n"
        "rank 1   (r1 d0) |C...S|\n" +
            legend + "1 (exact), makespan 5\n");
}

TEST_CASE("text timeline falls back to quantising when events are off the unit grid", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 1;
  t.events = {compute(0, k::forward, 0, 0, 1), compute(0, k::backward, 0, 1, 2.5)};
  CHECK(to_text(t, 5) == "rank 0   |AAaaa|\n" + legend + "0.5, makespan 2.5\n");
  CHECK(to_text(timeline{}) == legend + "0, makespan 0\n");
}

TEST_CASE("text timeline caps its width at max_text_width", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 1;
  t.events = {compute(0, k::forward, 0, 0, 1), compute(0, k::backward, 0, 1, 2.5)};
  const std::string text = to_text(t, 200000000);
  const std::string row = text.substr(0, text.find('\n'));
  CHECK(row.size() == std::string("rank 0   ||").size() + max_text_width);
}
