// Tests for runtime/checkpoint/rank_file's reader: rank-state numbers the writer never writes
// (fractions, exponents, values past the field's type) are refused, naming the field; a rank
// file of another step than the checkpoint resumed is named with both steps.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "ops/model/mlp.hpp"
#include "runtime/checkpoint/rank_file.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;

namespace {

// The reader's message for a file whose only content is this rank-state metadata.
std::string refusal(const std::string& rank_state_json) {
  const model<float> m = make_mlp<float>({.inputs = 3, .hidden = {2}, .classes = 2});
  safetensors_file f;
  f.source = "rank-0.safetensors";
  f.metadata["pipeworks.rank_state"] = rank_state_json;
  auto r = parse_rank_file(f, m, {0, m.size()});
  REQUIRE_FALSE(r.ok());
  return r.message();
}

// A state with nothing in it, with `field` (a JSON member) replacing its namesake.
std::string empty_state_with(const std::string& field) {
  std::string s = R"({"rank": 0, "step": 0, "pc": 0, "stages": [], "held": [], "send_f": [],)"
                  R"( "send_b": [], "deliver": [], "credits": [], "losses": [])";
  const std::string key = field.substr(0, field.find(':'));
  const std::size_t at = s.find(key);
  s.replace(at, s.find_first_of(",}", at) - at, field);
  return s + "}";
}

}  // namespace

// get<int>() of 1e10 was undefined behaviour and 4294967297 wrapped to 1 (reproduced with
// fuzz/rank_file.cpp; fuzz/rank_state.cpp fuzzes this JSON).
TEST_CASE("rank files refuse numbers out of a field's range naming the field",
          "[runtime][checkpoint]") {
  using Catch::Contains;
  CHECK_THAT(refusal(empty_state_with(R"("rank": 1e10)")),
             Contains("rank-0.safetensors") && Contains("\"rank\" must be a whole number in "
                                                        "-2147483648..2147483647, not 10000000000.0"));
  CHECK_THAT(refusal(empty_state_with(R"("rank": 4294967297)")),
             Contains("\"rank\" must be a whole number") && Contains("4294967297"));
  CHECK_THAT(refusal(empty_state_with(R"("rank": -3e9)")), Contains("\"rank\" must be"));
  CHECK_THAT(refusal(empty_state_with(R"("step": 1e300)")),
             Contains("\"step\" must be a whole number in "
                      "-9223372036854775808..9223372036854775807"));
  CHECK_THAT(refusal(empty_state_with(R"("pc": 18446744073709551615)")),
             Contains("\"pc\" must be"));
  CHECK_THAT(refusal(empty_state_with(R"("credits": [[1e20, false, 1]])")),
             Contains("a credit's stage must be"));
  CHECK_THAT(refusal(empty_state_with(R"("credits": [[1, false, 2.5]])")),
             Contains("a credit count must be") && Contains("2.5"));
}

TEST_CASE("rank files refuse a fraction where a whole number belongs and name the type",
          "[runtime][checkpoint]") {
  using Catch::Contains;
  CHECK_THAT(refusal(empty_state_with(R"("rank": 1.5)")), Contains("not 1.5"));
  CHECK_THAT(refusal(empty_state_with(R"("rank": "1")")), Contains("not string"));
  CHECK_THAT(refusal(empty_state_with(R"("rank": true)")), Contains("not boolean"));
  CHECK_THAT(refusal(empty_state_with(R"("stages": [{"stage": 0, "latest": 0,)"
                                      R"( "forwards_done": 0, "versions": [0.5]}])")),
             Contains("a version must be"));
}

TEST_CASE("a rank file of another step is named when a rank loads it", "[runtime][checkpoint]") {
  // A worker's rank reads its file from its own directory, which the driver cannot check first.
  const model<float> m = make_mlp<float>({.inputs = 3, .hidden = {2}, .classes = 2});
  test::scratch_dir dir;
  rank_state s;
  s.step = 10;
  auto written = write_rank_file(dir / "rank-0.safetensors", s);
  REQUIRE(written.ok());
  const checkpoint_file file{0, "rank-0.safetensors", written->bytes, written->sha256, {}, {}};
  const auto size = std::filesystem::file_size(dir / "rank-0.safetensors");
  auto other = load_rank_checkpoint(dir.path().string(), file, m, {0, m.size()}, {}, 15);
  REQUIRE_FALSE(other.ok());
  CHECK_THAT(other.message(),
             Catch::StartsWith(dir / "rank-0.safetensors" + " is a rank file of step 10, but the "
                                                             "checkpoint resumed is of step 15") &&
                 Catch::Contains("put back the rank file of step 15"));
  CHECK(std::filesystem::file_size(dir / "rank-0.safetensors") == size);  // still there
  auto same = load_rank_checkpoint(dir.path().string(), file, m, {0, m.size()}, {}, 10);
  REQUIRE(same.ok());
  CHECK(same->step == 10);
}
