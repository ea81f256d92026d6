// Tests for ops/data/minibatch: epoch batches cover the data once, the stream is reproducible,
// and gathering copies the right rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "ops/data/minibatch.hpp"

using namespace pipeworks;

TEST_CASE("epoch_batches cut one seeded shuffle into batches", "[ops][data]") {
  const auto e0 = epoch_batches(10, 3, 5, 0);
  REQUIRE(e0.size() == 3);  // the short last batch is dropped
  std::set<std::int64_t> seen;
  for (const auto& b : e0) {
    REQUIRE(b.size() == 3);
    seen.insert(b.begin(), b.end());
  }
  REQUIRE(seen.size() == 9);
  const auto all = epoch_batches(10, 3, 5, 0, false);
  REQUIRE(all.size() == 4);
  REQUIRE(all.back().size() == 1);
  REQUIRE(epoch_batches(10, 3, 5, 0) == e0);
  REQUIRE(epoch_batches(10, 3, 5, 1) != e0);
}

TEST_CASE("minibatch_sampler streams epoch after epoch", "[ops][data]") {
  minibatch_sampler s(10, 4, 9);
  REQUIRE(s.batches_per_epoch() == 2);
  const auto e0 = epoch_batches(10, 4, 9, 0);
  const auto e1 = epoch_batches(10, 4, 9, 1);
  auto take = [&] {
    auto b = s.next();
    return std::vector<std::int64_t>(b.begin(), b.end());
  };
  REQUIRE(take() == e0[0]);
  REQUIRE(s.epoch() == 0);
  REQUIRE(take() == e0[1]);
  REQUIRE(take() == e1[0]);
  REQUIRE(s.epoch() == 1);
  REQUIRE_THROWS_AS(minibatch_sampler(3, 4, 0), pipeworks_error);

  minibatch_sampler keep(5, 2, 1, false);
  REQUIRE(keep.next().size() == 2);
  REQUIRE(keep.next().size() == 2);
  REQUIRE(keep.next().size() == 1);
  REQUIRE(keep.epoch() == 0);
  REQUIRE(keep.next().size() == 2);
  REQUIRE(keep.epoch() == 1);
}

TEST_CASE("gather_images copies rows and labels by index", "[ops][data]") {
  image_dataset d{tensor({4, 3}, dtype::f32), tensor({4}, dtype::i32)};
  for (int i = 0; i < 12; ++i) d.images.data<float>()[i] = static_cast<float>(i);
  for (int i = 0; i < 4; ++i) d.labels.data<std::int32_t>()[i] = 10 * i;
  const std::vector<std::int64_t> idx = {3, 1};
  auto b = gather_images(d, idx);
  REQUIRE(b.ok());
  REQUIRE(b->images.shape() == shape_t{2, 3});
  REQUIRE(b->images.data<float>()[0] == 9.0f);
  REQUIRE(b->images.data<float>()[5] == 5.0f);
  REQUIRE(b->labels.data<std::int32_t>()[0] == 30);
  REQUIRE(b->labels.data<std::int32_t>()[1] == 10);
  const std::vector<std::int64_t> bad = {0, 4};
  REQUIRE_THAT(gather_images(d, bad).message(), Catch::Contains("index 4"));
}
