// Tests for ops/optim/lr_schedule: warmup ramp, cosine shape, end points and argument checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "ops/optim/lr_schedule.hpp"

using namespace pipeworks;

TEST_CASE("lr warms up linearly, then decays by cosine to the minimum", "[ops][optim]") {
  const lr_schedule s{1e-3, 1e-4, 10, 110};
  REQUIRE(lr_at(s, 0) == Approx(1e-4));
  REQUIRE(lr_at(s, 4) == Approx(5e-4));
  REQUIRE(lr_at(s, 9) == Approx(1e-3));
  REQUIRE(lr_at(s, 10) == Approx(1e-3));                      // p = 0
  REQUIRE(lr_at(s, 10 + 33) == Approx(1e-4 + 9e-4 * 0.75));   // p = 1/3: (1 + cos(pi/3)) / 2
  REQUIRE(lr_at(s, 10 + 50) == Approx(1e-4 + 9e-4 * (1 + std::cos(std::numbers::pi * 50 / 99)) / 2));
  REQUIRE(lr_at(s, 109) == Approx(1e-4));  // the final step
  REQUIRE(lr_at(s, 500) == Approx(1e-4));
  for (int k = 11; k < 110; ++k) REQUIRE(lr_at(s, k) <= lr_at(s, k - 1));
}

TEST_CASE("lr schedule edge cases", "[ops][optim]") {
  REQUIRE(lr_at({0.1, 0.0, 0, 1}, 0) == Approx(0.1));  // one step: no room to decay
  REQUIRE(lr_at({0.1, 0.0, 0, 3}, 2) == Approx(0.0));
  REQUIRE(lr_at({0.1, 0.0, 5, 5}, 4) == Approx(0.1));
  REQUIRE(validate(lr_schedule{0.1, 0.2, 0, 10}).message().find("min_lr") != std::string::npos);
  REQUIRE(validate(lr_schedule{0.1, 0.0, -1, 10}).message().find("warmup") != std::string::npos);
  REQUIRE(validate(lr_schedule{0.1, 0.0, 0, 0}).message().find("total_steps") != std::string::npos);
  REQUIRE(validate(lr_schedule{0.1, 0.01, 10, 100}).ok());
}
