// Tests for ops/tensor: shapes, ownership, typed access and reshape.
#include <catch2/catch.hpp>

#include "base/result.hpp"
#include "ops/tensor.hpp"

using namespace pipeworks;

TEST_CASE("tensor is zero-filled, typed and move-only", "[ops][tensor]") {
  tensor t({2, 3}, dtype::f32);
  REQUIRE(t.numel() == 6);
  REQUIRE(t.nbytes() == 24);
  for (float x : t.span<float>()) REQUIRE(x == 0.0f);
  t.data<float>()[5] = 7.0f;
  tensor u = std::move(t);
  REQUIRE(t.empty());
  REQUIRE(u.data<float>()[5] == 7.0f);
  REQUIRE_THROWS_AS(u.data<double>(), pipeworks_error);
  tensor c = u.clone();
  c.data<float>()[5] = 1.0f;
  REQUIRE(u.data<float>()[5] == 7.0f);
}

TEST_CASE("tensor reshape keeps the element count", "[ops][tensor]") {
  tensor t({4, 6}, dtype::f64);
  t.reshape({2, 12});
  REQUIRE(t.shape() == shape_t{2, 12});
  REQUIRE(shape_string(t.shape()) == "[2, 12]");
  REQUIRE_THROWS_AS(t.reshape({5, 5}), pipeworks_error);
}
