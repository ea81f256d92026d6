// Tests for ops/tensor: shapes, ownership, typed access, reshape, and explicit copies between
// devices.
#include <catch2/catch.hpp>

#include <cstring>

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

TEST_CASE("tensors cross devices only by explicit copies and a GPU tensor needs its allocator", "[ops][tensor]") {
  tensor a({2, 3});
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = static_cast<float>(i) + 0.5f;
  tensor b = a.copy_to(device::cpu());
  CHECK(b.where() == device::cpu());
  CHECK(std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0);
  CHECK(b.bytes() != a.bytes());
  tensor z = tensor::on({4}, dtype::f64, device::cpu(), nullptr);
  CHECK(z.data<double>()[3] == 0.0);
  const device gpu = parse_device("cuda:0").value();
  CHECK_THROWS_WITH(tensor::on({4}, dtype::f32, gpu, nullptr),
                    Catch::Contains("cuda:0 storage needs that GPU's allocator"));
  CHECK_THROWS_WITH(a.copy_to(gpu), Catch::Contains("cuda:0 storage needs that GPU's allocator"));
}
