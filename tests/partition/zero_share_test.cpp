// ZeRO's share of a stage's optimizer state as the planners count it (partition/zero_share.hpp):
// at least the largest tensor, at most the whole; the gather's time; the largest tensor of a range.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>

#include "partition/zero_share.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;
using partition_test::layer;

TEST_CASE("zero_share counts at least the largest tensor and at most the whole state", "[partition]") {
  CHECK(zero_share(2000, 500, 1) == 2000);
  CHECK(zero_share(2000, 500, 2) == 1000);
  CHECK(zero_share(2000, 500, 8) == 500);
  CHECK(zero_share(2001, 0, 2) == 1001);
  CHECK(zero_shared_out(2000, 500, 4) == 1500);
  CHECK(zero_gather_ms(1, 1000, 1e-6) == 0);
  CHECK(zero_gather_ms(4, 1000, 1e-6, 0.5) == Approx(0.75 * 1000 * 1e-6 + 1.5));
  model_profile p;
  for (std::int64_t big : {3, 9, 1, 4, 7, 2}) {
    p.layers.push_back(layer(1, 1, 1, 1, 1, big * 10));
    p.layers.back().largest_optimizer_bytes = big;
  }
  p.layers[2].largest_optimizer_bytes = 0;  // unknown: the layer's whole state, 10
  const largest_tensor_table t(p);
  for (int i = 0; i < 6; ++i)
    for (int j = i; j < 6; ++j) {
      std::int64_t want = 0;
      for (int l = i; l <= j; ++l) want = std::max(want, largest_optimizer_tensor(p.layers[l]));
      CHECK(t.max(i, j) == want);
    }
}
