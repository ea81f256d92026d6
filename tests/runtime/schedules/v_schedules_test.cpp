// Tests for the V schedules ZBV, V-Half, V-Min and DualPipeV: the V placement, validity over p, m,
// steps and replicas (compute-only and lowered), orders against their sources, in-flight
// activation bounds, OVERLAP_F_B's text and checks, and parameter errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedules/schedule_test_util.hpp"

using namespace pipeworks;

using pipeworks::test::peak_stashed;

namespace {

// p devices, m microbatches, and a V's two chunks per device.
schedule_params params(int p, int m, int steps = 1, int w = 1) {
  return test::params(p, m, steps, w, 2);
}

constexpr schedule_kind v_kinds[] = {schedule_kind::zbv, schedule_kind::v_half,
                                     schedule_kind::v_min};

}  // namespace

TEST_CASE("V schedules place virtual stages d and 2p-1-d on device d", "[runtime]") {
  for (schedule_kind k : v_kinds) {
    auto s = make_schedule(k, params(4, 8));
    REQUIRE(s.ok());
    CHECK(s->virtual_stages == 8);
    CHECK(s->device_of == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
    CHECK(is_flush(k));
    CHECK(splits_backward(k));
    CHECK(default_chunks(k) == 2);
  }
}

TEST_CASE("V schedules validate for p 1 to 6, m 1 to 3p, one and two steps and replicas",
          "[runtime]") {
  for (schedule_kind k : v_kinds)
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 3 * p; ++m)
        for (int steps : {1, 2})
          for (int w : {1, 2}) {
            INFO(std::string(schedule_name(k)) << " p=" << p << " m=" << m << " steps=" << steps
                                               << " w=" << w);
            auto s = make_schedule(k, params(p, m, steps, w));
            REQUIRE(s.ok());
            auto ok = validate(*s);
            CHECK(ok.message() == "");
            auto lowered = validate(lower_communication(*s));
            CHECK(lowered.message() == "");
          }
}

TEST_CASE("zbv matches PyTorch's ScheduleZBVZeroBubble order at p=2, m=4", "[runtime]") {
  auto s = zbv(params(2, 4));
  REQUIRE(s.ok());
  // Device 0 holds stages 0 and 3, device 1 stages 1 and 2; each STEP right after the stage's
  // last W. Worked by hand from PyTorch 2.11's _calculate_single_rank_operations.
  CHECK(to_string(s->programs[0]) ==
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 3STEP "
        "0I2 0W2 0I3 0W3 0STEP");
  CHECK(to_string(s->programs[1]) ==
        "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 "
        "2W3 2STEP 1W3 1STEP");
}

TEST_CASE("v-min matches the controllable-memory paper's greedy order at p=2, m=3", "[runtime]") {
  // The order the paper's reference code (its vhalf/vmin greedy reordering, run in Python) gives
  // for these sizes.
  auto s = v_min(params(2, 3));
  REQUIRE(s.ok());
  CHECK(to_string(s->programs[0]) ==
        "0F0 0F1 3F0 3I0 3W0 0I0 0W0 3F1 3I1 3W1 0F2 0I1 0W1 3F2 3I2 3W2 3STEP 0I2 0W2 0STEP");
  CHECK(to_string(s->programs[1]) ==
        "1F0 2F0 2I0 1I0 1F1 2F1 2W0 1W0 2I1 1I1 1F2 2F2 2W1 1W1 2I2 1I2 2W2 2STEP 1W2 1STEP");
}

TEST_CASE("V schedules hold as many activations as the papers say", "[runtime]") {
  // In chunks' activations, freed by the W: a 1F1B run on the same p devices holds p microbatches
  // of a whole stage (two chunks' worth) on its first device, 2p; ZBV as much, V-Half about half
  // (p + 2) and V-Min about a third (at most ceil(2p/3) + 2), at m = 3p.
  for (int p : {2, 4, 6, 8, 12, 16}) {
    const int m = 3 * p;
    int peak[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      auto s = make_schedule(v_kinds[i], params(p, m));
      REQUIRE(s.ok());
      for (int d = 0; d < p; ++d) peak[i] = std::max(peak[i], peak_stashed(s->programs[d]));
    }
    INFO("p=" << p << " zbv " << peak[0] << " v-half " << peak[1] << " v-min " << peak[2]);
    CHECK(peak[0] == 2 * p);
    CHECK(peak[1] == p + 2);
    CHECK(peak[2] <= (2 * p + 2) / 3 + 2);
  }
}

TEST_CASE("V schedules refuse another chunk count than 2", "[runtime]") {
  schedule_params sp = params(4, 8);
  sp.chunks = 1;
  for (schedule_kind k : v_kinds) {
    auto s = make_schedule(k, sp);
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("v must be 2") != std::string::npos);
  }
}

TEST_CASE("V schedules send twice 1F1B's pipeline traffic", "[runtime]") {
  // The V crosses every device boundary twice (down with chunk 0, back up with chunk 1); the turn
  // at device p-1 stays on the device.
  auto sends = [](const schedule& s) {
    int n = 0;
    for (const program& prog : lower_communication(s).programs)
      for (const action& a : prog)
        n += a.kind == action_kind::send_f || a.kind == action_kind::send_b;
    return n;
  };
  for (int p : {2, 3, 4, 8}) {
    const int m = 2 * p;
    schedule_params one = params(p, m);
    one.chunks = 1;
    auto base = one_f_one_b(one);
    REQUIRE(base.ok());
    CHECK(sends(*base) == 2 * (p - 1) * m);
    for (schedule_kind k : v_kinds) {
      auto s = make_schedule(k, params(p, m));
      REQUIRE(s.ok());
      INFO(schedule_name(k) << " p=" << p);
      CHECK(sends(*s) == 2 * sends(*base));
    }
  }
}

TEST_CASE("dualpipev matches PyTorch's ScheduleDualPipeV order at p=2, m=4", "[runtime]") {
  auto s = dualpipev(params(2, 4));
  REQUIRE(s.ok());
  // Worked by hand from PyTorch 2.11's _calculate_single_rank_operations: F0 warm-up, F0 F1,
  // I1 W F1, the overlapped main loop, B1 with F1&B0, then B and I at the end with their W.
  CHECK(to_string(s->programs[0]) ==
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
        "(3F3;0B1)OVERLAP_F_B 3B3 3STEP 0I2 0W2 0I3 0W3 0STEP");
  auto back = parse_program(to_string(s->programs[0]));
  REQUIRE(back.ok());
  CHECK(*back == s->programs[0]);
}

TEST_CASE("dualpipev validates for p 1 to 6, m 2p to 4p + 1, one and two steps and replicas",
          "[runtime]") {
  int checked = 0;
  for (int p = 1; p <= 6; ++p)
    for (int m = 2 * p; m <= 4 * p + 1; ++m)
      for (int steps : {1, 2})
        for (int w : {1, 2}) {
          INFO("p=" << p << " m=" << m << " steps=" << steps << " w=" << w);
          auto s = dualpipev(params(p, m, steps, w));
          REQUIRE(s.ok());
          CHECK(validate(*s).message() == "");
          const schedule lowered = lower_communication(*s);
          CHECK(validate(lowered).message() == "");
          // Lowering keeps each OVERLAP_F_B whole: the F and B right after it.
          for (const program& prog : lowered.programs)
            for (std::size_t i = 0; i < prog.size(); ++i)
              if (prog[i].kind == action_kind::overlap_f_b) {
                REQUIRE(i + 2 < prog.size());
                CHECK(prog[i + 1].kind == action_kind::forward);
                CHECK(prog[i + 2].kind == action_kind::backward);
              }
          ++checked;
        }
  CHECK(checked == 2 * 2 * (4 + 6 + 8 + 10 + 12 + 14));
}

TEST_CASE("dualpipev refuses fewer microbatches than virtual stages", "[runtime]") {
  auto s = dualpipev(params(4, 7));
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("m >= 2p") != std::string::npos);
}

TEST_CASE("OVERLAP_F_B parses, prints and is checked by the validator", "[runtime]") {
  auto pr = parse_program("0F0 (0F1;1B0)OVERLAP_F_B");
  REQUIRE(pr.ok());
  REQUIRE(pr->size() == 4);
  CHECK((*pr)[1] == action{0, action_kind::overlap_f_b, -1});
  CHECK(to_string(*pr) == "0F0 (0F1;1B0)OVERLAP_F_B");
  CHECK(parse_program("(0B1;1F0)OVERLAP_F_B").message().find("an F and then a B or I") !=
        std::string::npos);
  CHECK(parse_program("(0F1)OVERLAP_F_B").message().find("exactly two actions") !=
        std::string::npos);
  CHECK(parse_program("0OVERLAP_F_B").message().find("joins two actions") != std::string::npos);
  // A marker that does not sit right before its pair is refused by name.
  auto s = dualpipev(params(2, 4));
  REQUIRE(s.ok());
  schedule broken = *s;
  program& prog = broken.programs[0];
  const auto mark = std::find_if(prog.begin(), prog.end(), [](const action& a) {
    return a.kind == action_kind::overlap_f_b;
  });
  REQUIRE(mark != prog.end());
  std::iter_swap(mark + 1, mark + 2);  // the B before the F
  const std::string why = validate(broken).message();
  CHECK(why.find("OVERLAP_F_B must be followed at once by an F") != std::string::npos);
}

TEST_CASE("v-half and v-min refuse a size past their generator's bound naming what to lower", "[runtime]") {
  for (schedule_kind k : {schedule_kind::v_half, schedule_kind::v_min}) {
    INFO(schedule_name(k));
    auto s = make_schedule(k, schedule_params{1000, 1000, 2, 1, 1});
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains("too large for its generator"));
    CHECK_THAT(s.message(), Catch::Contains("lower --stages or --microbatches"));
    CHECK(make_schedule(k, schedule_params{16, 64, 2, 1, 1}).ok());
  }
}
