// Tests for partition/pipedream_flat.hpp: the fewest-units program by runs of equal r gives what
// the step-by-step scan gives (best, cut and reps), on random monotone stage costs and links.
#include "partition/pipedream_flat.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

using namespace pipeworks;
using namespace pipeworks::pipedream;

TEST_CASE("fewest units by runs of equal replicas matches the scan over every cut",
          "[partition]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 500; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 80);
    const int cap = 1 + static_cast<int>(rng() % 24);
    // r(i..j) = ceil(work(i..j) / unit), no_devices past cap: it only grows with j. Some layers
    // weigh nothing, so runs of one r are long and totals tie.
    std::vector<double> work{0};
    for (int l = 0; l < L; ++l) work.push_back(work.back() + static_cast<double>(rng() % 5));
    const double unit = 1.0 + static_cast<double>(rng() % 8);
    std::vector<char> link(L);
    const unsigned link_odds = rng() % 4;  // 0: every cut allowed
    for (char& c : link) c = link_odds == 0 || rng() % 4 >= link_odds;
    auto replicas = [&](int i, int j) {
      const int r = std::max(1, static_cast<int>(std::ceil((work[j + 1] - work[i]) / unit)));
      return r > cap ? no_devices : r;
    };
    auto link_ok = [&](int j) { return link[j] != 0; };
    fewest_units_program scan(L), runs(L);
    CAPTURE(trial, L, cap, unit, link_odds);
    const bool a = scan.run(L, cap, replicas, link_ok);
    auto serves = [&](int i, int j, int r) { return replicas(i, j) <= r; };
    const bool b = runs.run_by_runs(L, cap, replicas, serves, link_ok);
    CHECK(a == b);
    CHECK(scan.best == runs.best);
    CHECK(scan.cut == runs.cut);
    CHECK(scan.reps == runs.reps);
  }
}
