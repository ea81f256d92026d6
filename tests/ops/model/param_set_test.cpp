// Tests for param_set: arena layout, named views, copies and layout comparison.
#include "ops/model/param_set.hpp"

#include <catch2/catch.hpp>

#include "base/result.hpp"

using namespace pipeworks;

namespace {
param_set two_blocks() {
  return param_set({{{"a.weight", {2, 3}}, {"a.bias", {3}}}, {{"b.weight", {4}}}}, 5, dtype::f32);
}
}  // namespace

TEST_CASE("param_set lays blocks out contiguously with named views", "[ops]") {
  param_set p = two_blocks();
  REQUIRE(p.size() == 6 + 3 + 4);
  REQUIRE(p.first_block() == 5);
  REQUIRE(p.end_block() == 7);
  REQUIRE(p.block_begin(5) == 0);
  REQUIRE(p.block_end(5) == 9);
  REQUIRE(p.block_begin(6) == 9);
  REQUIRE(p.block_end(6) == 13);
  REQUIRE(p.entries()[1].offset == 6);
  REQUIRE(p.entries()[2].block == 6);
  auto v = p.view<float>("b.weight");
  REQUIRE(v.shape == shape_t{4});
  v.data[2] = 7.f;
  REQUIRE(p.values<float>()[11] == 7.f);
  REQUIRE(p.block_values<float>(6)[2] == 7.f);
  REQUIRE(p.find("nope") == nullptr);
  REQUIRE_THROWS_AS(p.view<float>("nope"), pipeworks_error);
  REQUIRE_THROWS_AS(p.values<double>(), pipeworks_error);
}

TEST_CASE("param_set clones deeply and zeros_like keeps the layout", "[ops]") {
  param_set p = two_blocks();
  p.values<float>()[0] = 1.5f;
  param_set c = p.clone();
  c.values<float>()[0] = 2.5f;
  REQUIRE(p.values<float>()[0] == 1.5f);
  param_set z = p.zeros_like();
  REQUIRE(z.same_layout(p));
  REQUIRE(z.values<float>()[0] == 0.f);
  param_set other({{{"a.weight", {3, 2}}, {"a.bias", {3}}}, {{"b.weight", {4}}}}, 5, dtype::f32);
  REQUIRE_FALSE(other.same_layout(p));
}

TEST_CASE("spec_offsets gives each tensor's start and the total", "[ops]") {
  auto off = spec_offsets({{"x", {2, 2}}, {"y", {3}}});
  REQUIRE(off == std::vector<std::int64_t>{0, 4, 7});
}
