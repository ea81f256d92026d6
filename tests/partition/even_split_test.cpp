// Tests for even_split (known cases, ties, one block per stage, agreement with brute force) and
// stage_flops.
#include "partition/even_split.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <random>

using namespace pipeworks;

namespace {

std::vector<layer_cost> flops(const std::vector<std::int64_t>& f) {
  std::vector<layer_cost> c;
  for (std::int64_t x : f) c.push_back(layer_cost{.flops_per_sample = x});
  return c;
}

double largest(const std::vector<layer_cost>& c, const std::vector<int>& b) {
  auto s = stage_flops(c, b);
  return *std::max_element(s.begin(), s.end());
}

// The smallest largest stage over every contiguous split with at least one block per stage.
double brute_force(const std::vector<layer_cost>& c, int stages) {
  const int n = static_cast<int>(c.size());
  double best = 1e300;
  std::vector<int> b{0};
  std::function<void()> go = [&] {
    if (static_cast<int>(b.size()) == stages) {
      b.push_back(n);
      best = std::min(best, largest(c, b));
      b.pop_back();
      return;
    }
    for (int next = b.back() + 1; next < n; ++next) {
      b.push_back(next);
      go();
      b.pop_back();
    }
  };
  go();
  return best;
}

}  // namespace

TEST_CASE("even_split balances small known cases", "[partition]") {
  REQUIRE(even_split(flops({1, 1, 1, 1}), 2).value() == std::vector<int>{0, 2, 4});
  REQUIRE(even_split(flops({1, 2, 3, 4, 5}), 2).value() == std::vector<int>{0, 3, 5});
  REQUIRE(even_split(flops({10, 1, 1, 1}), 2).value() == std::vector<int>{0, 1, 4});
  REQUIRE(even_split(flops({4, 1, 1, 1, 1}), 3).value() == std::vector<int>{0, 1, 2, 5});
  REQUIRE(even_split(flops({1, 1, 1, 10}), 2).value() == std::vector<int>{0, 3, 4});
  REQUIRE(even_split(flops({5, 7}), 1).value() == std::vector<int>{0, 2});
}

TEST_CASE("even_split breaks ties by starting the last stage early", "[partition]") {
  // {0,1,3} and {0,2,3} both have a largest stage of 2 blocks.
  REQUIRE(even_split(flops({1, 1, 1}), 2).value() == std::vector<int>{0, 1, 3});
  // Zero-cost blocks still give every stage at least one block.
  REQUIRE(even_split(flops({0, 0, 0, 0}), 3).value() == std::vector<int>{0, 1, 2, 4});
}

TEST_CASE("even_split gives one block per stage when p equals the blocks", "[partition]") {
  REQUIRE(even_split(flops({3, 9, 1, 4}), 4).value() == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("even_split finds the brute-force optimum on random costs", "[partition]") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> cost(0, 20);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + trial % 8;
    std::vector<std::int64_t> f(n);
    for (auto& x : f) x = cost(rng);
    const auto c = flops(f);
    for (int p = 1; p <= std::min(n, 4); ++p) {
      auto b = even_split(c, p);
      REQUIRE(b.ok());
      REQUIRE(static_cast<int>(b->size()) == p + 1);
      REQUIRE(b->front() == 0);
      REQUIRE(b->back() == n);
      for (int s = 0; s < p; ++s) REQUIRE((*b)[s] < (*b)[s + 1]);
      REQUIRE(largest(c, *b) == brute_force(c, p));
    }
  }
}

TEST_CASE("even_split refuses more stages than blocks, and no stages", "[partition]") {
  auto many = even_split(flops({1, 1}), 3);
  REQUIRE_FALSE(many.ok());
  REQUIRE_THAT(many.message(), Catch::Contains("2 blocks into 3 stages"));
  REQUIRE_THAT(many.message(), Catch::Contains("at most 2 stages"));
  REQUIRE_FALSE(even_split(flops({1, 1}), 0).ok());
  REQUIRE_FALSE(even_split({}, 1).ok());
  REQUIRE_FALSE(even_split(flops({1, -1}), 1).ok());
}

TEST_CASE("stage_flops sums forward plus backward FLOPs per stage", "[partition]") {
  const auto c = flops({1, 2, 3, 4});
  REQUIRE(stage_flops(c, {0, 1, 4}) == std::vector<double>{3.0, 27.0});
  REQUIRE(stage_flops(c, {0, 4}) == std::vector<double>{30.0});
}
