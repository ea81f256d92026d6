// Device names parse and print, and the GPU census answers without throwing whether or not this
// machine (or this build) has a GPU.
#include <catch2/catch.hpp>

#include "ops/device/device.hpp"

using namespace pipeworks;

TEST_CASE("devices parse from cpu cuda and cuda:N and print back", "[ops][device]") {
  CHECK(parse_device("cpu").value() == device{device_kind::cpu, 0});
  CHECK(parse_device("cuda").value() == device{device_kind::cuda, 0});
  CHECK(parse_device("cuda:3").value() == device{device_kind::cuda, 3});
  CHECK(parse_device("cuda:12").value().to_string() == "cuda:12");
  CHECK(parse_device("cpu").value().to_string() == "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999", "CPU", ""}) {
    auto d = parse_device(bad);
    REQUIRE_FALSE(d.ok());
    CHECK_THAT(d.message(), Catch::Contains("is not one of cpu, cuda, cuda:N"));
  }
}

TEST_CASE("a named device keeps how it was written and parses as parse_device does", "[ops][device]") {
  for (const char* name : {"cpu", "cuda", "cuda:0", "cuda:3"}) {
    auto n = parse_named_device(name);
    REQUIRE(n.ok());
    CHECK(n->to_string() == name);
    CHECK(n->where == parse_device(name).value());
    CHECK(named_device(name) == *n);
  }
  CHECK_FALSE(named_device("cuda") == named_device("cuda:0"));  // written back as each was read
  CHECK(named_device("cuda").where == named_device("cuda:0").where);
  CHECK_FALSE(named_device().on_gpu());
  CHECK(named_device("cuda:1").on_gpu());
  auto bad = parse_named_device("tpu");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message() == parse_device("tpu").message());
  CHECK_THROWS_AS(named_device("gpu0"), pipeworks_error);
}

TEST_CASE("the GPU census never throws and says why there are none", "[ops][device]") {
  const gpu_census c = find_gpus();
  CHECK(c.count >= 0);
  if (c.count == 0) {
    CHECK_FALSE(c.why.empty());  // a build without CUDA, or CUDA's error 35 / 100 in its words
    WARN(c.why);
  } else {
    CHECK(c.why.empty());
    CHECK_FALSE(c.names.empty());
  }
}
