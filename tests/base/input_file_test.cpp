// read_input_text refuses what is not a regular file (a named pipe would block the open, a device
// never ends) and a file over its bound, naming the path; a regular file reads whole.
#include "base/input_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace pipeworks;
namespace fs = std::filesystem;

TEST_CASE("input files must be regular files within their bound") {
  const fs::path dir = fs::temp_directory_path() / ("pipeworks-input-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "good.json") << R"({"a": 1})";
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);

  auto good = read_input_text((dir / "good.json").string(), 100, "profile");
  REQUIRE(good.ok());
  CHECK(*good == R"({"a": 1})");

  auto pipe = read_input_text((dir / "pipe").string(), 100, "profile");  // returns, never blocks
  REQUIRE_FALSE(pipe.ok());
  CHECK_THAT(pipe.message(), Catch::Contains("profile '" + (dir / "pipe").string() + "' is a named pipe"));

  auto device = read_input_text("/dev/zero", 100, "cost file");
  REQUIRE_FALSE(device.ok());
  CHECK_THAT(device.message(), Catch::Contains("'/dev/zero' is a device"));

  auto folder = read_input_text(dir.string(), 100, "run plan");
  REQUIRE_FALSE(folder.ok());
  CHECK_THAT(folder.message(), Catch::Contains("is a directory"));

  auto big = read_input_text((dir / "good.json").string(), 4, "cluster file");
  REQUIRE_FALSE(big.ok());
  CHECK_THAT(big.message(), Catch::Contains("is 8 bytes, more than the 4"));

  auto missing = read_input_text((dir / "nope").string(), 100, "cluster file");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("cannot open cluster file"));
  fs::remove_all(dir);
}
