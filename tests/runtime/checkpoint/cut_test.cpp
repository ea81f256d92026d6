// The checkpoint cut after each rank's own STEP N is consistent for every schedule and shape the
// generators permit, and check_cut finds a cut that is not.
#include <catch2/catch.hpp>

#include "runtime/checkpoint/cut.hpp"
#include "runtime/lower.hpp"

using namespace pipeworks;

namespace {

const std::vector<schedule_kind>& all_kinds = every_schedule_kind();

}  // namespace

TEST_CASE("the cut after each rank's STEP N is consistent for every schedule") {
  int checked = 0;
  for (schedule_kind k : all_kinds)
    for (int p : {1, 2, 3, 4})
      for (int v : {1, 2})
        for (int w : {1, 2, 3})
          for (int m : {1, 2, 3, 4, 5, 8, 9}) {
            const int steps = 4;
            auto made = make_schedule(k, schedule_params{p, m, v, w, steps});
            if (!made) continue;
            const schedule s = lower_communication(*made);
            for (int n = 1; n <= steps; ++n) {
              auto cut = checkpoint_cut(s, n);
              INFO(schedule_name(k) << " p=" << p << " v=" << v << " w=" << w << " m=" << m
                                    << " after step " << n);
              REQUIRE(cut.ok());
              status st = check_cut(s, *cut);
              INFO(st.message());
              CHECK(st.ok());
              ++checked;
            }
          }
  CHECK(checked > 500);
}

TEST_CASE("check_cut refuses a receive before the cut whose send is after") {
  auto made = make_schedule(schedule_kind::one_f_one_b, schedule_params{2, 2, 1, 1, 2});
  REQUIRE(made.ok());
  const schedule s = lower_communication(*made);
  auto cut = checkpoint_cut(s, 1);
  REQUIRE(cut.ok());
  std::vector<std::size_t> bad = *cut;
  bad[0] = 0;  // rank 0 records before it sends anything; rank 1 has received from it already
  CHECK_FALSE(check_cut(s, bad).ok());
  CHECK_FALSE(checkpoint_cut(s, 0).ok());
  CHECK_FALSE(checkpoint_cut(s, 3).ok());
}
