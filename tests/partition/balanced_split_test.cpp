// Tests for partition/balanced_split.hpp: the pruned scan gives exactly the splits of the full
// O(p·L²) dynamic program, ties included, with and without a memory rule.
#include "partition/balanced_split.hpp"

#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <vector>

using namespace pipeworks;

namespace {

// The full scan the planner used before: every i for every (s, j), the first minimum kept.
template <class Allowed>
std::vector<int> full_scan(const std::vector<double>& prefix, const std::vector<double>& speed,
                           Allowed allowed) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const int L = static_cast<int>(prefix.size()) - 1;
  const int p = static_cast<int>(speed.size());
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= p; ++s)
    for (int j = s; j <= L - (p - s); ++j)
      for (int i = s - 1; i < j; ++i) {
        if (best[s - 1][i] == inf || !allowed(s - 1, i, j)) continue;
        const double v = std::max(best[s - 1][i], (prefix[j] - prefix[i]) / speed[s - 1]);
        if (v < best[s][j]) {
          best[s][j] = v;
          cut[s][j] = i;
        }
      }
  if (best[p][L] == inf) return {};
  std::vector<int> first(p);
  for (int s = p, j = L; s >= 1; --s) {
    first[s - 1] = cut[s][j];
    j = cut[s][j];
  }
  return first;
}

}  // namespace

TEST_CASE("balanced_split matches the full dynamic program on random models", "[partition]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 60);
    const int p = 1 + static_cast<int>(rng() % std::min(L, 8));
    // Small integer times, some zero, so that ties are common; speeds 1, 2 or 4.
    std::vector<double> prefix{0};
    std::vector<double> mem{0};
    for (int l = 0; l < L; ++l) {
      prefix.push_back(prefix.back() + static_cast<double>(rng() % 4));
      mem.push_back(mem.back() + static_cast<double>(rng() % 5));
    }
    std::vector<double> speed(p);
    for (double& x : speed) x = static_cast<double>(1 << (rng() % 3));
    const double cap = static_cast<double>(rng() % 40);
    auto any = [](int, int, int) { return true; };
    auto fits = [&](int s, int i, int j) { return mem[j] - mem[i] <= cap + 4 * s; };
    CAPTURE(trial, L, p, cap);
    CHECK(balanced_split(prefix, speed, any) == full_scan(prefix, speed, any));
    CHECK(balanced_split(prefix, speed) == full_scan(prefix, speed, any));
    const std::vector<double> same(p, speed[0]);  // the O(p·L) path
    CHECK(balanced_split(prefix, same) == full_scan(prefix, same, any));
    CHECK(balanced_split(prefix, speed, fits) == full_scan(prefix, speed, fits));
  }
}

TEST_CASE("balanced_split splits 10000 layers over 8 stages evenly", "[partition]") {
  std::vector<double> prefix{0};
  for (int l = 0; l < 10000; ++l) prefix.push_back(prefix.back() + 1.0);
  const std::vector<double> speed(8, 1.0);
  for (const std::vector<int>& first :
       {balanced_split(prefix, speed), balanced_split(prefix, speed, [](int, int, int) {
          return true;
        })}) {
    REQUIRE(first.size() == 8);
    for (int s = 0; s < 8; ++s) CHECK(first[s] == 1250 * s);
  }
}

TEST_CASE("balanced_split finds no split for times past the largest double", "[partition]") {
  const double big = std::numeric_limits<double>::max();
  const std::vector<double> prefix{0, big, big * 2, big * 2};  // the sum overflows to inf
  CHECK(balanced_split(prefix, {1.0}).empty());
  CHECK(balanced_split(prefix, {1.0, 1.0}).empty() ==
        full_scan(prefix, {1.0, 1.0}, [](int, int, int) { return true; }).empty());
  CHECK(balanced_split({0, 1}, {1.0, 1.0}).empty());  // fewer layers than stages
}
