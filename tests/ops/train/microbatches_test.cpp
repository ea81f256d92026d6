// Tests for row slicing and the microbatch split.
#include "ops/train/microbatches.hpp"

#include <catch2/catch.hpp>

using namespace pipeworks;

namespace {
minibatch counting(std::int64_t B, std::int64_t cols) {
  minibatch mb{tensor({B, cols}, dtype::f32), tensor({B}, dtype::i32)};
  for (std::int64_t i = 0; i < B * cols; ++i) mb.inputs.data<float>()[i] = static_cast<float>(i);
  for (std::int64_t i = 0; i < B; ++i) mb.targets.data<std::int32_t>()[i] = static_cast<int>(i);
  return mb;
}
}  // namespace

TEST_CASE("slice_rows copies the rows asked for", "[ops]") {
  minibatch mb = counting(5, 3);
  tensor s = slice_rows(mb.inputs, 1, 3);
  REQUIRE(s.shape() == shape_t{2, 3});
  REQUIRE(s.data<float>()[0] == 3.f);
  REQUIRE(s.data<float>()[5] == 8.f);
  REQUIRE_THROWS_WITH(slice_rows(mb.inputs, 4, 6), Catch::Contains("[4, 6)"));
}

TEST_CASE("split_minibatch cuts m equal microbatches with their targets", "[ops]") {
  minibatch mb = counting(6, 2);
  auto parts = split_minibatch(mb, 3);
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 3);
  const microbatch& last = (*parts)[2];
  REQUIRE(last.ctx.batch == 2);
  REQUIRE(last.input.data<float>()[0] == 8.f);
  REQUIRE(last.ctx.targets->data<std::int32_t>()[1] == 5);
  auto bad = split_minibatch(mb, 4);
  REQUIRE_FALSE(bad.ok());
  REQUIRE_THAT(bad.message(), Catch::Contains("6") && Catch::Contains("4"));
}

TEST_CASE("make_microbatch without targets leaves the context empty", "[ops]") {
  microbatch m = make_microbatch(counting(4, 2), 0, 4, false);
  REQUIRE(m.ctx.batch == 4);
  REQUIRE(m.ctx.targets == nullptr);
}
