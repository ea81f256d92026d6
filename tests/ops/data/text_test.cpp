// Tests for ops/data/text: corpus loading from files and directories, the split, and the random
// and evaluation windows.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "ops/data/text.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {
void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
std::string bytes_of(const text_corpus& c) { return {c.bytes.begin(), c.bytes.end()}; }
}  // namespace

TEST_CASE("load_text reads a file, or a directory's text files in sorted order", "[ops][data]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  write(dir / "b", "BBB");
  write(dir / "a", "AA");
  write(dir / "a.dat", "index");
  fs::create_symlink(dir / "a", dir / "a.u8");
  fs::create_symlink(dir / "b", dir / "c");
  fs::create_directories(dir / "sub");
  write(dir / "sub" / "z", "nested");

  auto one = load_text((dir / "b").string());
  REQUIRE(one.ok());
  REQUIRE(bytes_of(*one) == "BBB");
  auto all = load_text(dir.string());
  REQUIRE(all.ok());
  REQUIRE(bytes_of(*all) == "AABBB");
  REQUIRE(all->sources.size() == 2);

  REQUIRE_THAT(load_text((dir / "missing.txt").string()).message(),
               Catch::Contains("missing.txt") && Catch::Contains("not found"));
  REQUIRE_THAT(load_text("/usr/share/games/fortunes/no-such-file").message(),
               Catch::Contains("no-such-file") && Catch::Contains("package fortunes"));
  fs::create_directories(dir / "empty");
  REQUIRE_THAT(load_text((dir / "empty").string()).message(), Catch::Contains("no text"));
}

TEST_CASE("the fortunes corpus loads when installed", "[ops][data]") {
  if (!fs::exists(fortunes_default_dir)) {
    WARN("fortunes is not installed; skipping");
    return;
  }
  auto c = load_text(fortunes_default_dir);
  REQUIRE(c.ok());
  REQUIRE(c->bytes.size() > 1000000);
  for (const auto& s : c->sources) {
    REQUIRE(s.find(".dat") == std::string::npos);
    REQUIRE(s.find(".u8") == std::string::npos);
  }
}

TEST_CASE("split_text holds out the last bytes", "[ops][data]") {
  std::vector<std::uint8_t> t(1000);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i);
  auto s = split_text(t, 0.05);
  REQUIRE(s.train.size() == 950);
  REQUIRE(s.validation.size() == 50);
  REQUIRE(s.validation.data() == t.data() + 950);
  REQUIRE(split_text(t, 0.0).validation.empty());
}

TEST_CASE("random_windows: targets are inputs shifted by one, fixed by (seed, step)",
          "[ops][data]") {
  std::vector<std::uint8_t> t(500);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i % 251);
  auto a = random_windows(t, 4, 16, 3, 0);
  REQUIRE(a.ok());
  REQUIRE(a->inputs.shape() == shape_t{4, 16});
  REQUIRE(a->targets.shape() == shape_t{4, 16});
  const auto* in = a->inputs.data<std::int32_t>();
  const auto* tg = a->targets.data<std::int32_t>();
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 16; ++j) {
      if (j + 1 < 16) REQUIRE(tg[b * 16 + j] == in[b * 16 + j + 1]);
      REQUIRE(tg[b * 16 + j] == (in[b * 16 + j] + 1) % 251);
    }
  auto again = random_windows(t, 4, 16, 3, 0);
  auto other = random_windows(t, 4, 16, 3, 1);
  const auto same = std::equal(in, in + 64, again->inputs.data<std::int32_t>());
  const auto differs = !std::equal(in, in + 64, other->inputs.data<std::int32_t>());
  REQUIRE(same);
  REQUIRE(differs);
  // The last possible window (start n - T - 1) is reachable: a text of exactly T + 1 bytes works.
  std::vector<std::uint8_t> tiny = {1, 2, 3};
  auto w = random_windows(tiny, 2, 2, 0, 0);
  REQUIRE(w.ok());
  REQUIRE(w->targets.data<std::int32_t>()[1] == 3);
  REQUIRE_THAT(random_windows(tiny, 1, 3, 0, 0).message(), Catch::Contains("3 bytes"));
}

TEST_CASE("eval_windows takes the first non-overlapping windows of T+1 bytes", "[ops][data]") {
  std::vector<std::uint8_t> t(20);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint8_t>(i);
  auto w = eval_windows(t, 3, 4);
  REQUIRE(w.ok());
  // Window i covers bytes [5i, 5i + 5): inputs 5i..5i+3, targets 5i+1..5i+4.
  const std::vector<std::int32_t> in(w->inputs.data<std::int32_t>(),
                                     w->inputs.data<std::int32_t>() + 12);
  const std::vector<std::int32_t> tg(w->targets.data<std::int32_t>(),
                                     w->targets.data<std::int32_t>() + 12);
  REQUIRE(in == std::vector<std::int32_t>{0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13});
  REQUIRE(tg == std::vector<std::int32_t>{1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14});
  REQUIRE(eval_windows(t, 4, 4).ok());  // exactly 20 bytes
  REQUIRE_THAT(eval_windows(t, 5, 4, "book.txt").message(),
               Catch::Contains("book.txt") && Catch::Contains("need 25"));
}
