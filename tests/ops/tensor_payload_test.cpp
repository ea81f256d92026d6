// tensor_payload::as: bytes received before their shape was known are read as the tensor the
// message names, without a copy, only when the byte counts match.
#include <catch2/catch.hpp>

#include "ops/tensor_payload.hpp"

using namespace pipeworks;

TEST_CASE("a payload of bytes is read as a tensor of the same byte count and no other", "[tensor]") {
  auto raw = tensor_payload::allocate(dtype::f32, {6});
  REQUIRE(raw);
  float* f = reinterpret_cast<float*>(raw->writable_bytes().data());
  for (int i = 0; i < 6; ++i) f[i] = static_cast<float>(i) + 0.5f;
  auto shaped = raw->as(dtype::f32, {2, 3});
  REQUIRE(shaped);
  CHECK(shaped->shape() == shape_t{2, 3});
  CHECK(shaped->bytes().data() == raw->bytes().data());  // no copy
  tensor t = shaped->copy();
  CHECK(t.data<float>()[4] == 4.5f);
  auto wide = raw->as(dtype::f64, {3});
  REQUIRE(wide);
  CHECK(wide->type() == dtype::f64);
  CHECK(wide->nbytes() == 24);
  for (const shape_t& wrong : {shape_t{7}, shape_t{2, 2}, shape_t{-2, -3}, shape_t{0}, shape_t{1LL << 40, 1LL << 40},
                               shape_t{-1, 0}}) {
    CAPTURE(shape_string(wrong));
    auto bad = raw->as(dtype::f32, wrong);
    REQUIRE_FALSE(bad);
    CHECK(bad.message().find("24 bytes cannot be read") != std::string::npos);
  }
  CHECK_FALSE(raw->as(dtype::f64, {6}));
}
