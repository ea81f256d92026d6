// Tests for the lane-split row reductions, with lengths around the lane count.
#include "ops/kernels/reduce.hpp"

#include <catch2/catch.hpp>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

TEST_CASE("row_max, row_sum and row_dot agree with plain loops", "[ops]") {
  for (std::int64_t n : {1, 7, 8, 9, 16, 37}) {
    const auto a = random_values(n, std::uint64_t(n)), b = random_values(n, std::uint64_t(n) + 100);
    double m = a[0], s = 0, d = 0;
    for (std::int64_t i = 0; i < n; i++) m = std::max(m, a[i]), s += a[i], d += a[i] * b[i];
    CHECK(row_max(a.data(), n) == m);
    CHECK(row_sum(a.data(), n) == Approx(s).epsilon(1e-13));
    CHECK(row_dot(a.data(), b.data(), n) == Approx(d).epsilon(1e-13));
  }
  std::vector<float> x(20, -5.0f);
  x[19] = -1.0f;  // the maximum in the tail
  CHECK(row_max(x.data(), 20) == -1.0f);
  x[3] = 2.0f;  // and in the body
  CHECK(row_max(x.data(), 20) == 2.0f);
}
