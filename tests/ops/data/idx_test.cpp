// Tests for ops/data/idx: gzip and plain IDX files, and every way a file can be wrong.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ops/data/idx.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> idx_bytes(std::uint32_t magic, std::vector<std::uint32_t> dims,
                                     std::size_t payload) {
  std::vector<unsigned char> b;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  for (std::size_t i = 0; i < payload; ++i) b.push_back(static_cast<unsigned char>(i * 7));
  return b;
}

void write_gz(const fs::path& p, const std::vector<unsigned char>& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

}  // namespace

TEST_CASE("read_idx_ubyte reads gzip and plain files", "[ops][data]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const auto bytes = idx_bytes(0x00000803, {2, 3, 4}, 24);
  write_gz(dir / "a.gz", bytes);
  std::ofstream(dir / "a.idx", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  for (const char* name : {"a.gz", "a.idx"}) {
    auto r = read_idx_ubyte((dir / name).string(), 3);
    REQUIRE(r.ok());
    REQUIRE(r->dims == std::vector<std::int64_t>{2, 3, 4});
    REQUIRE(r->values.size() == 24);
    REQUIRE(r->values[5] == 35);
  }
}

TEST_CASE("read_idx_ubyte rejects missing, mislabelled, truncated and corrupt files",
          "[ops][data]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  auto missing = read_idx_ubyte((dir / "nope.gz").string(), 1, "install the Debian package x");
  REQUIRE_THAT(missing.message(),
               Catch::Contains("nope.gz") && Catch::Contains("install the Debian package x"));

  write_gz(dir / "magic.gz", idx_bytes(0x00000801, {3}, 3));
  REQUIRE_THAT(read_idx_ubyte((dir / "magic.gz").string(), 3).message(),
               Catch::Contains("bad magic number 0x00000801"));

  write_gz(dir / "short.gz", idx_bytes(0x00000801, {10}, 6));
  REQUIRE_THAT(read_idx_ubyte((dir / "short.gz").string(), 1).message(),
               Catch::Contains("short.gz") && Catch::Contains("truncated") &&
                   Catch::Contains("10 data bytes"));

  write_gz(dir / "long.gz", idx_bytes(0x00000801, {4}, 6));
  REQUIRE_THAT(read_idx_ubyte((dir / "long.gz").string(), 1).message(),
               Catch::Contains("data after"));

  // A gzip stream cut in half: decompression stops early.
  write_gz(dir / "full.gz", idx_bytes(0x00000801, {5000}, 5000));
  std::ifstream in(dir / "full.gz", std::ios::binary);
  std::vector<char> gz((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir / "cut.gz", std::ios::binary).write(gz.data(), static_cast<std::streamsize>(gz.size() / 2));
  REQUIRE_THAT(read_idx_ubyte((dir / "cut.gz").string(), 1).message(),
               Catch::Contains("cut.gz") && Catch::Contains("truncated"));

  // A flipped byte inside the deflate data or the CRC trailer.
  gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0x55);
  std::ofstream(dir / "crc.gz", std::ios::binary).write(gz.data(), static_cast<std::streamsize>(gz.size()));
  auto crc = read_idx_ubyte((dir / "crc.gz").string(), 1);
  REQUIRE_FALSE(crc.ok());
  REQUIRE_THAT(crc.message(), Catch::Contains("crc.gz"));
}
