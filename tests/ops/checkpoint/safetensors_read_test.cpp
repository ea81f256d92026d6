// Tests for ops/checkpoint/safetensors_read: corrupted files are rejected with messages that name
// the tensor or the byte offset, and loading checks names and shapes.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ops/checkpoint/safetensors.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

// A file from a header string and data bytes, as a buffer.
std::vector<std::byte> make_file(const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> b(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i)
    b[static_cast<std::size_t>(i)] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
  std::memcpy(b.data() + 8, header.data(), header.size());
  for (std::size_t i = 0; i < data_bytes; ++i) b[8 + header.size() + i] = std::byte{0x3f};
  return b;
}

std::string parse_error(const std::string& header, std::size_t data_bytes) {
  auto r = parse_safetensors(make_file(header, data_bytes), "t.safetensors");
  REQUIRE_FALSE(r.ok());
  return r.message();
}

const std::string good =
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
    R"("b":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]}})";

}  // namespace

TEST_CASE("parse_safetensors accepts a well-formed file", "[ops][checkpoint]") {
  auto r = parse_safetensors(make_file(good, 16), "t.safetensors");
  REQUIRE(r.ok());
  REQUIRE(r->tensors.size() == 2);
  REQUIRE(r->find("b")->shape == shape_t{1, 2});
  REQUIRE(r->metadata.empty());
}

TEST_CASE("parse_safetensors rejects truncated files and bad headers", "[ops][checkpoint]") {
  REQUIRE_THAT(parse_safetensors({std::byte{1}}, "t").message(),
               Catch::Contains("truncated") && Catch::Contains("8-byte"));
  REQUIRE_THAT(parse_error("", 0), Catch::Contains("not valid JSON"));
  // Cut inside the data: names the tensor and the byte where it ends.
  REQUIRE_THAT(parse_error(good, 12),
               Catch::Contains("truncated") && Catch::Contains("tensor b") &&
                   Catch::Contains("file byte " + std::to_string(8 + good.size() + 16)));
  // Offsets near 2^64: the message gives them as written, never a sum that wrapped around.
  const std::string huge = R"({"a":{"dtype":"F32","shape":[1],)"
                           R"("data_offsets":[18446744073709551611,18446744073709551615]}})";
  REQUIRE_THAT(parse_error(huge, 4), Catch::Contains("tensor a ends at data byte "
                                                     "18446744073709551615 (past 2^64") &&
                                         Catch::Contains("4 of them after the header"));
  // Cut inside the header: the length runs past the end.
  auto cut = make_file(good, 16);
  cut.resize(40);
  REQUIRE_THAT(parse_safetensors(cut, "t").message(),
               Catch::Contains("header length at byte 0") && Catch::Contains("40 bytes"));
  REQUIRE_THAT(parse_error(R"({"a": [1, 2,)", 0), Catch::Contains("not valid JSON"));
  REQUIRE_THAT(parse_error("[1, 2]", 0), Catch::Contains("not an object"));
}

// Found by fuzz/safetensors.cpp: nlohmann throws out_of_range, not parse_error, for such numbers.
TEST_CASE("parse_safetensors returns an error for a header number past a double's range",
          "[ops][checkpoint]") {
  for (const char* header : {R"({"a": 1e999})", R"({"44 ":4422222E27444})",
                             R"({"a":{"dtype":"F32","shape":[-1e400],"data_offsets":[0,4]}})"}) {
    INFO(header);
    REQUIRE_THAT(parse_error(header, 4), Catch::Contains("is not valid JSON") &&
                                             Catch::Contains("number overflow"));
  }
}

TEST_CASE("parse_safetensors rejects bad entries", "[ops][checkpoint]") {
  REQUIRE_THAT(parse_error(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", 8),
               Catch::Contains("tensor w") && Catch::Contains("BF16"));
  REQUIRE_THAT(parse_error(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
               Catch::Contains("tensor w") && Catch::Contains("needs 12"));
  REQUIRE_THAT(parse_error(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
               Catch::Contains("tensor w") && Catch::Contains("non-negative"));
  REQUIRE_THAT(parse_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
               Catch::Contains("tensor w") && Catch::Contains("begin <= end"));
  REQUIRE_THAT(parse_error(R"({"w":{"dtype":"F32","shape":[2]}})", 8),
               Catch::Contains("tensor w") && Catch::Contains("data_offsets"));
  REQUIRE_THAT(parse_error(R"({"__metadata__":{"step":3}})", 0),
               Catch::Contains("__metadata__") && Catch::Contains("step"));
}

TEST_CASE("parse_safetensors rejects overlapping, gapped and out-of-range offsets",
          "[ops][checkpoint]") {
  const std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  REQUIRE_THAT(parse_error(overlap, 12),
               Catch::Contains("tensor b") && Catch::Contains("overlaps tensor a"));
  const std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  REQUIRE_THAT(parse_error(gap, 12), Catch::Contains("data bytes 4..8") &&
                                         Catch::Contains("belong to no tensor"));
  REQUIRE_THAT(parse_error(good, 20), Catch::Contains("4 bytes after the last tensor"));
  const std::string past = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[1000,1008]}})";
  REQUIRE_THAT(parse_error(past, 8), Catch::Contains("tensor a"));
}

TEST_CASE("load_into and load_tensors check names and shapes", "[ops][checkpoint]") {
  const auto dir = fs::temp_directory_path() /
                   ("pipeworks_st_read_test_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const auto path = (dir / "m.safetensors").string();
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<double> b = {0.5, -0.5};
  const std::vector<std::int32_t> k = {3};
  const std::vector<safetensors_entry> e = {entry_of("h.0.w", {2, 3}, std::span(w)),
                                            entry_of("h.0.b", {2}, std::span(b)),
                                            entry_of("step", {1}, std::span(k))};
  REQUIRE(save_safetensors(path, e).ok());
  auto f = read_safetensors(path);
  REQUIRE(f.ok());

  std::vector<double> wd(6), bd(2);
  const std::vector<load_target<double>> targets = {{"h.0.w", {2, 3}, wd}, {"h.0.b", {2}, bd}};
  REQUIRE(load_into<double>(*f, targets).ok());
  REQUIRE(wd[5] == 6.0);
  REQUIRE(bd[1] == -0.5);

  const std::vector<tensor_spec> specs = {{"h.0.w", {2, 3}}, {"h.0.b", {2}}};
  auto loaded = load_tensors(*f, specs);
  REQUIRE(loaded.ok());
  REQUIRE((*loaded)[0].data<float>()[4] == 5.0f);
  REQUIRE((*loaded)[1].data<float>()[0] == 0.5f);

  const std::vector<tensor_spec> wrong_shape = {{"h.0.w", {3, 2}}};
  REQUIRE_THAT(load_tensors(*f, wrong_shape).message(),
               Catch::Contains("h.0.w") && Catch::Contains("[2, 3]") &&
                   Catch::Contains("expected [3, 2]"));
  const std::vector<tensor_spec> missing = {{"h.1.w", {2, 3}}};
  REQUIRE_THAT(load_tensors(*f, missing).message(),
               Catch::Contains("no tensor h.1.w") && Catch::Contains(path));
  const std::vector<tensor_spec> ints = {{"step", {1}}};
  REQUIRE_THAT(load_tensors(*f, ints).message(), Catch::Contains("step") && Catch::Contains("I32"));
  REQUIRE_THAT(read_safetensors((dir / "none").string()).message(), Catch::Contains("none"));

  // A truncated copy on disk is caught when read.
  fs::resize_file(path, fs::file_size(path) - 3);
  REQUIRE_THAT(read_safetensors(path).message(), Catch::Contains("truncated"));
  fs::remove_all(dir);
}

TEST_CASE("read_safetensors refuses a directory instead of allocating its 'size'",
          "[ops][checkpoint]") {
  const test::scratch_dir dir("pipeworks-read-dir-test");
  auto r = read_safetensors(dir.path().string());
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.message(), Catch::Contains(dir.path().string()) && Catch::Contains("directory"));
}
