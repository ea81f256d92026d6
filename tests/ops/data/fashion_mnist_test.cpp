// Tests for ops/data/fashion_mnist: the Debian files when installed, and mismatched or missing
// files built in a temporary directory.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "ops/data/fashion_mnist.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

void write_idx_gz(const fs::path& p, std::uint32_t magic, std::vector<std::uint32_t> dims,
                  const std::vector<unsigned char>& payload) {
  std::vector<unsigned char> b;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  b.insert(b.end(), payload.begin(), payload.end());
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, b.data(), static_cast<unsigned>(b.size()));
  gzclose(f);
}

}  // namespace

TEST_CASE("Fashion-MNIST test split loads from the Debian package", "[ops][data]") {
  if (!fs::exists(std::string(fashion_mnist_default_dir) + "/t10k-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed; skipping");
    return;
  }
  auto r = load_fashion_mnist(dataset_split::test);
  REQUIRE(r.ok());
  REQUIRE(r->images.shape() == shape_t{10000, 784});
  REQUIRE(r->labels.shape() == shape_t{10000});
  std::vector<int> per_class(10, 0);
  for (auto l : r->labels.span<std::int32_t>()) ++per_class[static_cast<std::size_t>(l)];
  for (int c : per_class) REQUIRE(c == 1000);  // the test split is balanced
  float lo = 1, hi = 0;
  for (float x : r->images.span<float>()) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  REQUIRE(lo == 0.0f);
  REQUIRE(hi == 1.0f);
  REQUIRE(r->labels.data<std::int32_t>()[0] == 9);  // the first test image is an ankle boot
}

TEST_CASE("Fashion-MNIST errors name the file and the package", "[ops][data]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  auto missing = load_fashion_mnist(dataset_split::train, dir.string());
  REQUIRE_THAT(missing.message(), Catch::Contains("train-images-idx3-ubyte.gz") &&
                                      Catch::Contains("dataset-fashion-mnist"));
  // A file where the directory belongs (a text file given to an mlp) is named as such, not as a
  // missing package.
  std::ofstream(dir / "text.txt") << "some text";
  REQUIRE_THAT(load_fashion_mnist(dataset_split::train, (dir / "text.txt").string()).message(),
               Catch::Contains("is a file: give that directory") &&
                   !Catch::Contains("dataset-fashion-mnist"));

  std::vector<unsigned char> pixels(3 * 784, 255);
  write_idx_gz(dir / "t10k-images-idx3-ubyte.gz", 0x00000803, {3, 28, 28}, pixels);
  write_idx_gz(dir / "t10k-labels-idx1-ubyte.gz", 0x00000801, {2}, {1, 2});
  REQUIRE_THAT(load_fashion_mnist(dataset_split::test, dir.string()).message(),
               Catch::Contains("3 images") && Catch::Contains("2 labels"));

  write_idx_gz(dir / "t10k-labels-idx1-ubyte.gz", 0x00000801, {3}, {1, 12, 2});
  REQUIRE_THAT(load_fashion_mnist(dataset_split::test, dir.string()).message(),
               Catch::Contains("label 12") && Catch::Contains("sample 1"));

  write_idx_gz(dir / "t10k-labels-idx1-ubyte.gz", 0x00000801, {3}, {1, 0, 2});
  auto ok = load_fashion_mnist(dataset_split::test, dir.string());
  REQUIRE(ok.ok());
  REQUIRE(ok->size() == 3);
  REQUIRE(ok->images.data<float>()[0] == 1.0f);
}
