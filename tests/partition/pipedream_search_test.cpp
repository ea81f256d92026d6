// The bottleneck search of PipeDream's planners: it ends on the least feasible double exactly,
// from below or above its lower bound, and leaves the predicate last called at the answer.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "partition/pipedream_search.hpp"

using pipeworks::pipedream::least_feasible;

TEST_CASE("least_feasible ends on the least feasible double", "[partition]") {
  for (const double answer : {0.0, 1e-12, 0.3, 3.7185, 1234.5, 1e300}) {
    std::vector<double> probes;
    const auto feasible = [&](double b) {
      probes.push_back(b);
      return b >= answer;
    };
    const double hi = std::max(2 * answer, 1.0);
    const double b = least_feasible(answer / 3, hi, feasible);
    CHECK(b == answer);
    CHECK(probes.back() == answer);
  }
}

TEST_CASE("least_feasible returns its lower bound when that is feasible", "[partition]") {
  int calls = 0;
  const double b = least_feasible(2.5, 10.0, [&](double x) {
    ++calls;
    return x >= 2.0;
  });
  CHECK(b == 2.5);
  CHECK(calls == 1);
}

TEST_CASE("least_feasible reaches an infinite upper bound", "[partition]") {
  const double b = least_feasible(1.0, std::numeric_limits<double>::infinity(),
                                  [](double x) { return x >= 1e6 + 0.5; });
  CHECK(b == 1e6 + 0.5);
}
