// dir_lock: one holder of a checkpoint directory at a time; a second is refused naming the
// directory, and the lock is free again once its holder goes.
#include "runtime/checkpoint/dir_lock.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

using namespace pipeworks;
namespace fs = std::filesystem;

TEST_CASE("a checkpoint directory is locked by one run at a time", "[runtime][checkpoint]") {
  const fs::path dir = fs::temp_directory_path() / ("pipeworks-lock-" + std::to_string(::getpid())) / "ck";
  fs::remove_all(dir.parent_path());
  {
    auto first = dir_lock::take(dir.string());  // makes the directory
    REQUIRE(first.ok());
    CHECK(fs::is_directory(dir));
    auto second = dir_lock::take(dir.string());
    REQUIRE_FALSE(second.ok());
    CHECK_THAT(second.message(), Catch::Contains(dir.string()) && Catch::Contains("in use by another run"));
  }
  CHECK(dir_lock::take(dir.string()).ok());  // the first holder went
  fs::remove_all(dir.parent_path());
}
