// Tests for runtime/pytorch_csv.cpp: every file it writes passes PyTorch's loading rules
// (tests/runtime/pytorch_rules.hpp), in both formats, for every schedule, replica and step.
#include "runtime/pytorch_csv.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "runtime/lower.hpp"
#include "tests/runtime/pytorch_rules.hpp"

using namespace pipeworks;
using pipeworks::test::pytorch_load_error;

namespace {

const schedule_kind all_kinds[] = {
    schedule_kind::gpipe,     schedule_kind::one_f_one_b,  schedule_kind::interleaved,
    schedule_kind::zb_h1,     schedule_kind::zb_h2,        schedule_kind::bfs,
    schedule_kind::pipedream, schedule_kind::pipedream_vs, schedule_kind::two_bw,
    schedule_kind::cyclic};

int chunks_of(schedule_kind k) {
  return k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
}

}  // namespace

TEST_CASE("every PyTorch CSV of every schedule, replica and step loads under PyTorch's rules",
          "[runtime]") {
  for (schedule_kind k : all_kinds)
    for (int p : {2, 3})
      for (int w : {1, 2})
        for (int steps : {1, 2}) {
          const int m = 2 * p, v = chunks_of(k);
          CAPTURE(schedule_name(k), p, w, steps);
          auto made = make_schedule(k, {p, m, v, w, steps});
          REQUIRE(made.ok());
          const schedule lowered = lower_communication(*made);
          if (steps > 1 && !is_flush(k)) {
            // PipeDream, 2BW and cyclic start step 1 before step 0 ends on a rank.
            auto r = pytorch_programs(*made, pytorch_form::compute_only, 0, 1);
            REQUIRE_FALSE(r.ok());
            CHECK_THAT(r.message(), Catch::Contains("no flush between optimizer steps"));
            continue;
          }
          for (int q = 0; q < w; ++q)
            for (int t = 0; t < steps; ++t) {
              CAPTURE(q, t);
              auto only = pytorch_programs(*made, pytorch_form::compute_only, q, t);
              REQUIRE(only.ok());
              CHECK(pytorch_load_error(to_pytorch_csv(*only), p, p * v, m, true) == "");
              auto comms = pytorch_programs(lowered, pytorch_form::compute_comms, q, t);
              REQUIRE(comms.ok());
              const std::string text = to_pytorch_csv(*comms);
              CHECK(pytorch_load_error(text, p, p * v, m, false) == "");
              CHECK(text.find("REDUCE_GRAD") != std::string::npos);
              // The compute actions are the same, in the same order, in both forms.
              for (int d = 0; d < p; ++d) {
                program compute;
                for (const action& a : (*comms)[d])
                  if (is_compute(a.kind)) compute.push_back(a);
                CHECK(compute == (*only)[d]);
              }
            }
        }
}

TEST_CASE("what PyTorch refuses: w times p rows, REDUCE_GRAD in compute_only, merged steps",
          "[runtime]") {
  // The checker can fail: pipeworks' own CSV has STEP and REDUCE, which PyTorch cannot read,
  // and w * p rows that repeat every stage on two ranks.
  auto two = make_schedule(schedule_kind::one_f_one_b, {2, 4, 1, 2, 1});
  REQUIRE(two.ok());
  CHECK_THAT(pytorch_load_error(to_csv(two->programs), 4, 2, 4, true),
             Catch::Contains("Invalid action string: 0REDUCE"));
  CHECK_THAT(pytorch_load_error(to_csv(two->programs), 2, 2, 4, true),
             Catch::Contains("Invalid action string"));
  std::vector<program> both_replicas = two->programs;
  for (program& prog : both_replicas) std::erase_if(prog, [](const action& a) {
      return !is_compute(a.kind);
    });
  CHECK_THAT(pytorch_load_error(to_pytorch_csv(both_replicas), 4, 2, 4, true),
             Catch::Contains("Stage 0 is assigned to both rank 2 and rank 0"));
  CHECK_THAT(pytorch_load_error(to_pytorch_csv(both_replicas), 2, 2, 4, true),
             Catch::Contains("incorrect number of ranks - expected 2, actual 4"));
  // A compute_only file with REDUCE_GRAD.
  auto reduce = pytorch_programs(lower_communication(*two), pytorch_form::compute_comms, 0, 0);
  REQUIRE(reduce.ok());
  for (program& prog : *reduce) std::erase_if(prog, [](const action& a) { return is_comm(a.kind); });
  CHECK_THAT(pytorch_load_error(to_pytorch_csv(*reduce), 2, 2, 4, true),
             Catch::Contains("Expected compute-only schedule"));
  // Two steps merged into one file: 8 forwards per stage, not m = 4.
  auto steps = make_schedule(schedule_kind::gpipe, {2, 4, 1, 1, 2});
  REQUIRE(steps.ok());
  std::vector<program> merged = steps->programs;
  for (program& prog : merged) std::erase_if(prog, [](const action& a) {
      return !is_compute(a.kind);
    });
  CHECK_THAT(pytorch_load_error(to_pytorch_csv(merged), 2, 2, 4, true),
             Catch::Contains("Got 8 F microbatches"));
  // A lowered file whose RECV comes before its SEND can run does not progress.
  CHECK_THAT(pytorch_load_error("0RECV_B0,0F0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n", 2, 2, 1,
                                false),
             Catch::Contains("not progressing"));
}

TEST_CASE("pytorch_programs renumbers microbatches per step and says what is out of range",
          "[runtime]") {
  auto s = make_schedule(schedule_kind::gpipe, {2, 2, 1, 2, 3});
  REQUIRE(s.ok());
  auto last = pytorch_programs(*s, pytorch_form::compute_only, 1, 2);
  REQUIRE(last.ok());
  CHECK(to_string((*last)[0]) == "0F0 0F1 0B0 0B1");
  auto comms = pytorch_programs(lower_communication(*s), pytorch_form::compute_comms, 1, 2);
  REQUIRE(comms.ok());
  CHECK(to_string((*comms)[0]) == "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE");
  CHECK(to_pytorch_csv(*comms).find("0REDUCE_GRAD\n") != std::string::npos);
  CHECK_THAT(pytorch_programs(*s, pytorch_form::compute_only, 2, 0).message(),
             Catch::Contains("replica 2 is not one of the schedule's 2 (0..1)"));
  CHECK_THAT(pytorch_programs(*s, pytorch_form::compute_only, 0, 3).message(),
             Catch::Contains("step 3 is not one of the schedule's 3 (0..2)"));
  CHECK_THAT(pytorch_programs(*s, pytorch_form::compute_comms, 0, 0).message(),
             Catch::Contains("needs a lowered schedule"));
}

TEST_CASE("pytorch_programs refuses dualpipe, whose second route PyTorch's CSV cannot say",
          "[runtime]") {
  auto s = make_schedule(schedule_kind::dualpipe, {.stages = 2, .microbatches = 4, .chunks = 2});
  REQUIRE(s.ok());
  for (pytorch_form form : {pytorch_form::compute_only, pytorch_form::compute_comms}) {
    auto rows = pytorch_programs(lower_communication(*s), form, 0, 0);
    REQUIRE_FALSE(rows.ok());
    CHECK(rows.message().find("dualpipe feeds microbatches from both ends") != std::string::npos);
    CHECK(rows.message().find("stages 2..3 would read as further model pieces") !=
          std::string::npos);
  }
}
