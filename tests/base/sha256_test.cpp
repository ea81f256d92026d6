// Tests for base/sha256: the NIST FIPS 180-2 example vectors, the same digest however the input
// is split, and sha256_file against a known file and a missing one.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/sha256.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {
std::string digest_of(std::string_view text) {
  sha256 h;
  h.update(std::as_bytes(std::span(text.data(), text.size())));
  return h.hex_digest();
}
}  // namespace

TEST_CASE("sha256 gives the NIST digests of the empty string and abc", "[base][sha256]") {
  CHECK(digest_of("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(digest_of("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("sha256 gives the NIST digest of the 448-bit message", "[base][sha256]") {
  CHECK(digest_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("sha256 of one million a streamed in uneven chunks gives the NIST digest",
          "[base][sha256]") {
  const std::string a(1'000'000, 'a');
  const auto bytes = std::as_bytes(std::span(a.data(), a.size()));
  sha256 h;
  std::size_t done = 0, chunk = 1;
  while (done < bytes.size()) {
    const std::size_t n = std::min(chunk, bytes.size() - done);
    h.update(bytes.subspan(done, n));
    done += n;
    chunk = chunk * 7 % 65'537 + 1;  // 1, 8, 57, 400, ...: sizes that straddle 64-byte blocks
  }
  CHECK(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256_file hashes a file and names a missing one", "[base][sha256]") {
  const fs::path dir =
      fs::temp_directory_path() / ("pipeworks_sha256_test_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "abc.txt", std::ios::binary);
    out << "abc";
  }
  auto got = sha256_file((dir / "abc.txt").string());
  REQUIRE(got.ok());
  CHECK(*got == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Larger than one read: 20 MiB of a pattern, hashed in memory too.
  std::vector<char> big(20u << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 % 251);
  std::ofstream(dir / "big.bin", std::ios::binary).write(big.data(), static_cast<std::streamsize>(big.size()));
  sha256 h;
  h.update(std::as_bytes(std::span(big)));
  CHECK(sha256_file((dir / "big.bin").string()).value() == h.hex_digest());
  const auto missing = sha256_file((dir / "nope.bin").string());
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("nope.bin") && Catch::Contains("No such file"));
  fs::remove_all(dir);
}
