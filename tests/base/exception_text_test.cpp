// Tests for base/exception_text: a failed allocation says "out of memory" with the process's
// memory instead of the bare "std::bad_alloc"; other exceptions keep their message.
#include <catch2/catch.hpp>

#include <new>
#include <stdexcept>
#include <vector>

#include "base/exception_text.hpp"

using namespace pipeworks;

TEST_CASE("exception_text turns a failed allocation into out of memory with the memory held",
          "[base]") {
  const std::bad_alloc bad;
  CHECK(is_out_of_memory(bad));
  CHECK_THAT(exception_text(bad), Catch::StartsWith("out of memory: an allocation failed") &&
                                      Catch::Contains("GiB"));
  CHECK_THAT(exception_text(bad), !Catch::Contains("std::bad_alloc"));
  try {
    std::vector<double> huge;
    huge.reserve(huge.max_size() + 1);
  } catch (const std::exception& e) {
    CHECK(is_out_of_memory(e));
    CHECK_THAT(exception_text(e), Catch::StartsWith("out of memory"));
  }
  const std::runtime_error other("stage 1 failed");
  CHECK_FALSE(is_out_of_memory(other));
  CHECK(exception_text(other) == "stage 1 failed");
}
