// Tests for runtime/checkpoint/data_fingerprint: a file's and a directory's fingerprint, what
// data_changes names (and a modification time alone that it does not), and the record a run's
// manifests carry.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/sha256.hpp"
#include "runtime/checkpoint/data_fingerprint.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Sets a file's modification time to 1700000000 + `seconds` seconds since 1970: no clock is read.
void set_mtime(const std::string& path, int seconds) {
  const timespec times[2] = {{1700000000 + seconds, 0}, {1700000000 + seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

data_fingerprint fingerprint(const std::string& path) {
  auto f = fingerprint_data(path);
  if (!f) FAIL(f.message());
  return *f;
}

}  // namespace

TEST_CASE("a file's fingerprint is its absolute path, size, time and the sha256 of its bytes",
          "[runtime][checkpoint]") {
  test::scratch_dir dir;
  const std::string path = dir / "text.txt";
  write(path, "the cat sat on the mat\n");
  set_mtime(path, 1);
  const data_fingerprint f = fingerprint(path);
  CHECK(f.path == fs::path(path).lexically_normal().string());
  CHECK(f.bytes == 23);
  CHECK(f.files == 1);
  CHECK(f.mtime_ns == std::int64_t{1700000001} * 1000000000);
  auto digest = sha256_file(path);
  REQUIRE(digest.ok());
  CHECK(f.sha256 == *digest);  // what sha256sum prints
  // "dir/./text.txt" is the same path, written another way.
  CHECK(fingerprint(dir.path().string() + "/./text.txt") == f);
  CHECK(data_changes(f, f).empty());
}

TEST_CASE("data_changes names the path size and sha256 that changed but not a time alone",
          "[runtime][checkpoint]") {
  test::scratch_dir dir;
  const std::string a = dir / "a.txt", b = dir / "b.txt";
  write(a, "0123456789");
  set_mtime(a, 1);
  const data_fingerprint before = fingerprint(a);

  // Touched: the same bytes, so the same data.
  set_mtime(a, 2);
  const data_fingerprint touched = fingerprint(a);
  CHECK(touched.mtime_ns != before.mtime_ns);
  CHECK(data_changes(before, touched).empty());

  // One byte changed, the size kept: the sha256 names it, and the time is said too.
  write(a, "0123456780");
  set_mtime(a, 3);
  std::string changes = data_changes(before, fingerprint(a));
  CHECK_THAT(changes, Catch::Contains("its sha256 is ") && Catch::Contains(before.sha256) &&
                          Catch::Contains("modification time changed"));
  CHECK_THAT(changes, !Catch::Contains("size") && !Catch::Contains("path"));

  // Longer: the size, both values.
  write(a, "0123456789abc");
  set_mtime(a, 4);
  changes = data_changes(before, fingerprint(a));
  CHECK_THAT(changes, Catch::Contains("its size is 13 bytes, the checkpoint's was 10"));

  // The same bytes at another path (a relative --data in another directory): the path.
  write(b, "0123456789");
  set_mtime(b, 1);
  changes = data_changes(before, fingerprint(b));
  CHECK(changes == "its path is " + b + ", the checkpoint's was " + a);

  // A symbolic link to the same file is the same path.
  fs::create_symlink(b, dir / "link.txt");
  CHECK(data_changes(fingerprint(b), fingerprint(dir / "link.txt")).empty());
}

TEST_CASE("a directory's fingerprint covers every file directly in it", "[runtime][checkpoint]") {
  test::scratch_dir dir;
  const fs::path data = dir.path() / "texts";
  fs::create_directories(data / "sub");
  write((data / "one.txt").string(), "first file\n");
  write((data / "two.txt").string(), "second file\n");
  write((data / "sub" / "ignored.txt").string(), "the loaders read no subdirectory\n");
  for (const char* f : {"one.txt", "two.txt"}) set_mtime((data / f).string(), 1);
  const data_fingerprint before = fingerprint(data.string());
  CHECK(before.files == 2);
  CHECK(before.bytes == 23);
  CHECK(before.path == data.string());

  // A subdirectory's files are not read, so they are not part of it.
  write((data / "sub" / "ignored.txt").string(), "changed\n");
  CHECK(fingerprint(data.string()) == before);

  // A file renamed: same bytes, another listing.
  fs::rename(data / "two.txt", data / "three.txt");
  CHECK_THAT(data_changes(before, fingerprint(data.string())), Catch::Contains("its sha256 is"));
  fs::rename(data / "three.txt", data / "two.txt");
  CHECK(data_changes(before, fingerprint(data.string())).empty());

  // A file added: the count, the size and the sha256.
  write((data / "four.txt").string(), "4\n");
  const std::string changes = data_changes(before, fingerprint(data.string()));
  CHECK_THAT(changes, Catch::Contains("it holds 3 files, the checkpoint's held 2") &&
                          Catch::Contains("its size is 25 bytes, the checkpoint's was 23") &&
                          Catch::Contains("its sha256 is"));
}

TEST_CASE("a missing data path is an error naming it", "[runtime][checkpoint]") {
  test::scratch_dir dir;
  auto f = fingerprint_data(dir / "nothing.txt");
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.message(), Catch::Contains(dir / "nothing.txt") && Catch::Contains("does not exist"));
}

TEST_CASE("a run's data record is kept per checkpoint directory", "[runtime][checkpoint]") {
  test::scratch_dir dir;
  const data_record r{{"/data/a.txt", 10, 5, 1, std::string(64, 'a')}, std::nullopt, 0};
  set_run_data(dir / "ck", r);
  REQUIRE(run_data(dir / "ck").has_value());
  CHECK(*run_data(dir.path().string() + "/./ck") == r);  // the same directory, written another way
  CHECK_FALSE(run_data(dir / "other").has_value());
  set_run_data(dir / "ck", std::nullopt);
  CHECK_FALSE(run_data(dir / "ck").has_value());
}
