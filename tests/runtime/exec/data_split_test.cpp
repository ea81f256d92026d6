// Tests for deal_microbatches: round-robin dealing of rows to replicas, and its errors.
#include "runtime/exec/data_split.hpp"

#include <catch2/catch.hpp>

using namespace pipeworks;

namespace {

// Inputs (B, 2) with row i = (i, 100 + i); targets (B) with target i = i.
minibatch numbered(std::int64_t B) {
  minibatch mb{tensor({B, 2}, dtype::f32), tensor({B}, dtype::i32)};
  for (std::int64_t i = 0; i < B; ++i) {
    mb.inputs.data<float>()[2 * i] = static_cast<float>(i);
    mb.inputs.data<float>()[2 * i + 1] = static_cast<float>(100 + i);
    mb.targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(i);
  }
  return mb;
}

}  // namespace

TEST_CASE("deal_microbatches gives global microbatch j to replica j % w as its j / w",
          "[runtime]") {
  const minibatch mb = numbered(12);
  auto dealt = deal_microbatches(mb, 2, 3);  // b = 2 rows each
  REQUIRE(dealt.ok());
  REQUIRE(dealt->size() == 2);
  for (int r = 0; r < 2; ++r) {
    REQUIRE((*dealt)[r].size() == 3);
    for (int k = 0; k < 3; ++k) {
      const microbatch& u = (*dealt)[r][k];
      const int j = k * 2 + r;
      REQUIRE(u.input.shape() == shape_t{2, 2});
      REQUIRE(u.ctx.batch == 2);
      REQUIRE(u.ctx.targets);
      for (int row = 0; row < 2; ++row) {
        REQUIRE(u.input.data<float>()[2 * row] == static_cast<float>(j * 2 + row));
        REQUIRE(u.input.data<float>()[2 * row + 1] == static_cast<float>(100 + j * 2 + row));
        REQUIRE(u.ctx.targets->data<std::int32_t>()[row] == j * 2 + row);
      }
    }
  }
}

TEST_CASE("deal_microbatches with one replica is split_minibatch", "[runtime]") {
  const minibatch mb = numbered(8);
  auto dealt = deal_microbatches(mb, 1, 4);
  auto split = split_minibatch(mb, 4);
  REQUIRE(dealt.ok());
  REQUIRE(split.ok());
  REQUIRE(dealt->size() == 1);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 4; ++i)
      REQUIRE((*dealt)[0][k].input.data<float>()[i] == (*split)[k].input.data<float>()[i]);
}

TEST_CASE("deal_microbatches names B, w and m when they do not fit", "[runtime]") {
  auto uneven = deal_microbatches(numbered(10), 2, 2);
  REQUIRE_FALSE(uneven.ok());
  REQUIRE_THAT(uneven.message(), Catch::Contains("B = 10") && Catch::Contains("2 * 2 = 4") &&
                                     Catch::Contains("use a batch of 8 or 12"));
  auto small = deal_microbatches(numbered(3), 2, 2);
  REQUIRE_FALSE(small.ok());
  REQUIRE_THAT(small.message(), Catch::Contains("B = 3") && Catch::Contains("less than one row"));
  REQUIRE_FALSE(deal_microbatches(numbered(4), 0, 2).ok());
  REQUIRE_FALSE(deal_microbatches(numbered(4), 2, 0).ok());
  minibatch bad = numbered(4);
  bad.targets = tensor({3}, dtype::i32);
  REQUIRE_FALSE(deal_microbatches(bad, 1, 2).ok());
}
