// Tests for the float exp approximation against libm in double, over its whole useful
// range, and the limits it must reach.
#include "ops/kernels/fast_math.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using namespace pipeworks;

TEST_CASE("exp_approx is within 2e-7 relative of exp", "[ops]") {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 1e-3) {
    const float f = float(x);
    const double want = std::exp(double(f));
    worst = std::max(worst, std::fabs(exp_approx(f) - want) / want);
  }
  CHECK(worst < 2e-7);
  CHECK(exp_approx(0.0f) == 1.0f);
  CHECK(exp_approx(-200.0f) == 0.0f);
  CHECK(std::isinf(exp_approx(200.0f)));
}

TEST_CASE("the double overload is libm's", "[ops]") { CHECK(fast_exp(0.3) == std::exp(0.3)); }
