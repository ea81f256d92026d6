// Tests for ops/checkpoint/atomic_file: the bytes and the sha256 of what is written, refusals of
// a symbolic link, a directory and a device (left untouched), no temporary file left behind (not
// even by a process killed while writing), and errors that name the directory that cannot be
// written.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/sha256.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

using test::names_in;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace

TEST_CASE("write_file_atomic writes the parts in order and returns their size and sha256",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const std::string a = "ab", empty, b = "c";
  const std::vector<std::span<const std::byte>> parts = {bytes_of(a), bytes_of(empty), bytes_of(b)};
  auto w = write_file_atomic((dir / "f.bin").string(), parts);
  REQUIRE(w.ok());
  CHECK(w->bytes == 3);
  CHECK(w->sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // "abc"
  CHECK(slurp(dir / "f.bin") == "abc");
  CHECK(names_in(dir) == std::vector<std::string>{"f.bin"});
}

// Writes `size` bytes in parts of uneven sizes (some larger than one write, many small ones) over
// an older big.bin in dir, and checks the file, its size and its hash.
void check_big_file(const fs::path& dir, std::size_t size) {
  const auto path = (dir / "big.bin").string();
  std::ofstream(path) << "old contents";
  std::vector<std::string> pieces;
  std::mt19937 rng(7);
  std::size_t total = 0;
  for (std::size_t part : {size / 2, std::size_t{3}, std::size_t{0}}) {
    pieces.emplace_back(part, '\0');
    total += part;
  }
  for (int i = 0; i < 3000; ++i) {
    pieces.emplace_back(static_cast<std::size_t>(rng() % 5000), '\0');
    total += pieces.back().size();
  }
  pieces.emplace_back(size - total, '\0');
  std::string whole;
  for (auto& p : pieces) {
    for (auto& c : p) c = static_cast<char>(rng());
    whole += p;
  }
  std::vector<std::span<const std::byte>> parts;
  for (const auto& p : pieces) parts.push_back(bytes_of(p));
  auto w = write_file_atomic(path, parts);
  INFO((w.ok() ? std::string() : w.message()));
  REQUIRE(w.ok());
  CHECK(w->bytes == size);
  CHECK(fs::file_size(path) == size);
  sha256 h;
  h.update(bytes_of(whole));
  CHECK(w->sha256 == h.hex_digest());
  CHECK(slurp(path) == whole);
  CHECK(sha256_file(path).value() == w->sha256);
  CHECK(names_in(dir) == std::vector<std::string>{"big.bin"});
}

TEST_CASE("write_file_atomic hashes a large file in the background and replaces the old one",
          "[ops][checkpoint]") {
  // A size that is a whole number of pages and one that is not.
  for (std::size_t size : {std::size_t{40} << 20, (std::size_t{40} << 20) + 1234}) {
    INFO("size " << size);
    const test::scratch_dir scratch;
    check_big_file(scratch.path(), size);
  }
  // tmpfs, which has no disk behind it (fsync and the page-cache hints do nothing there).
  if (fs::is_directory("/dev/shm")) {
    const fs::path shm = fs::path("/dev/shm") / ("pipeworks-atomic-" + std::to_string(::getpid()));
    fs::create_directories(shm);
    check_big_file(shm, (std::size_t{24} << 20) + 77);
    fs::remove_all(shm);
  }
}

TEST_CASE("write_file_atomic refuses a symbolic link and a directory and leaves them untouched",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  std::ofstream(dir / "real.txt") << "keep me";
  fs::create_symlink(dir / "real.txt", dir / "link.txt");
  fs::create_directory(dir / "sub");
  const std::string text = "new";
  const std::vector<std::span<const std::byte>> parts = {bytes_of(text)};

  auto link = write_file_atomic((dir / "link.txt").string(), parts);
  REQUIRE_FALSE(link.ok());
  CHECK_THAT(link.message(), Catch::Contains((dir / "link.txt").string()) &&
                                 Catch::Contains("symbolic link"));
  CHECK(fs::is_symlink(dir / "link.txt"));
  CHECK(slurp(dir / "real.txt") == "keep me");

  auto sub = write_file_atomic((dir / "sub").string(), parts);
  REQUIRE_FALSE(sub.ok());
  CHECK_THAT(sub.message(), Catch::Contains((dir / "sub").string()) &&
                                Catch::Contains("a directory"));
  CHECK(fs::is_directory(dir / "sub"));
  CHECK(fs::is_empty(dir / "sub"));
  CHECK(names_in(dir) == std::vector<std::string>{"link.txt", "real.txt", "sub"});
}

TEST_CASE("write_file_atomic names a directory it cannot write in and leaves nothing behind",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const std::string text = "x";
  const std::vector<std::span<const std::byte>> parts = {bytes_of(text)};

  auto missing = write_file_atomic((dir / "no" / "such" / "f").string(), parts);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains((dir / "no" / "such").string()) &&
                                    Catch::Contains("No such file or directory"));

  std::ofstream(dir / "plain") << "a file, not a directory";
  auto not_dir = write_file_atomic((dir / "plain" / "f").string(), parts);
  REQUIRE_FALSE(not_dir.ok());
  CHECK_THAT(not_dir.message(), Catch::Contains((dir / "plain").string()) &&
                                    Catch::Contains("Not a directory"));

  // A directory without write permission; root ignores permissions, so then /sys, which refuses
  // new files even to root (skipped where it does not).
  fs::create_directory(dir / "locked");
  fs::permissions(dir / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  std::string locked;
  for (const std::string candidate : {(dir / "locked").string(), std::string("/sys")}) {
    const std::string probe = candidate + "/pipeworks-probe";
    if (std::ofstream(probe)) {
      fs::remove(probe);
      continue;
    }
    locked = candidate;
    break;
  }
  if (locked.empty()) {
    WARN("no directory here refuses new files; skipping the permission case");
  } else {
    auto denied = write_file_atomic(locked + "/pipeworks-test.bin", parts);
    REQUIRE_FALSE(denied.ok());
    CHECK_THAT(denied.message(), Catch::Contains("directory " + locked) &&
                                     Catch::Contains("pipeworks-test.bin"));
    CHECK_FALSE(fs::exists(locked + "/pipeworks-test.bin"));
  }
  fs::permissions(dir / "locked", fs::perms::owner_all);
  CHECK(fs::is_empty(dir / "locked"));
  CHECK(names_in(dir) == std::vector<std::string>{"locked", "plain"});
}

TEST_CASE("fsync_directory names a missing directory", "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  CHECK(fsync_directory(dir.string()).ok());
  const auto s = fsync_directory((dir / "gone").string());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains((dir / "gone").string()));
}

TEST_CASE("write_file_atomic refuses a device and a named pipe and leaves them as they were",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  REQUIRE(::mkfifo((scratch / "pipe").c_str(), 0600) == 0);
  const auto device = write_text_atomic("/dev/null", "x");
  REQUIRE_FALSE(device.ok());
  CHECK_THAT(device.message(), Catch::Contains("/dev/null: it is a device, not a regular file"));
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  const auto pipe = write_text_atomic(scratch / "pipe", "x");
  REQUIRE_FALSE(pipe.ok());
  CHECK_THAT(pipe.message(), Catch::Contains("it is a named pipe"));
  CHECK(fs::is_fifo(scratch / "pipe"));
  CHECK(write_text_atomic(scratch / "text", "plain").ok());
  CHECK(slurp(scratch / "text") == "plain");
}

namespace {

// A process id that no process has now: a child's, once it has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

TEST_CASE("write_file_atomic removes the temporaries of its target that dead processes left",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const std::string dead = ".f.bin.tmp." + host() + "." + std::to_string(dead_pid()) + ".0";
  const std::string alive = ".f.bin.tmp." + host() + "." + std::to_string(::getppid()) + ".3";
  const std::string other_host = ".f.bin.tmp.elsewhere-" + host() + "." +
                                 std::to_string(dead_pid()) + ".0";
  const std::string other_file = ".g.bin.tmp." + host() + "." + std::to_string(dead_pid()) + ".0";
  const std::string not_ours = ".f.bin.tmp." + host() + ".12x.0";
  for (const auto& name : {dead, alive, other_host, other_file, not_ours})
    std::ofstream(scratch / name) << "left";
  REQUIRE(write_text_atomic(scratch / "f.bin", "new").ok());
  auto expected = std::vector<std::string>{alive, other_host, other_file, not_ours, "f.bin"};
  std::sort(expected.begin(), expected.end());
  CHECK(names_in(scratch.path()) == expected);
}

TEST_CASE("a process killed while writing leaves the old file and nothing that outlives the next "
          "write",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const std::string target = scratch / "big.bin";
  REQUIRE(write_text_atomic(target, "old").ok());
  const std::string big(std::size_t{64} << 20, 'x');
  for (int delay_us : {0, 2000, 20000, 200000}) {
    const pid_t child = ::fork();
    if (child == 0) {
      (void)write_text_atomic(target, big);
      ::_exit(0);
    }
    ::usleep(static_cast<useconds_t>(delay_us));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    const std::string now = slurp(target);
    CHECK((now == "old" || now == big));  // one file or the other, never a part
    REQUIRE(write_text_atomic(target, "old").ok());
    CHECK(names_in(scratch.path()) == std::vector<std::string>{"big.bin"});
  }
}
