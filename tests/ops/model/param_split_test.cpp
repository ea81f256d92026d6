// Tests for split_params and join_params: the round trip is bit-exact, a split equals the
// stage's own init, and bad boundaries or stages that do not line up are refused.
#include "ops/model/param_split.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>

#include "ops/model/mlp.hpp"
#include "ops/model/model_spec.hpp"

using namespace pipeworks;

namespace {

bool same_bytes(const param_set& a, const param_set& b) {
  return a.same_layout(b) && a.nbytes() == b.nbytes() &&
         std::memcmp(a.arena().bytes(), b.arena().bytes(), a.nbytes()) == 0;
}

std::vector<param_snapshot> snapshots(std::vector<param_set> stages) {
  std::vector<param_snapshot> out;
  for (auto& s : stages) out.push_back(std::make_shared<const param_set>(std::move(s)));
  return out;
}

template <class T>
void check_round_trip(const model<T>& m, const std::vector<int>& b) {
  const param_set whole = m.init_params(7);
  auto stages = split_params(whole, b);
  REQUIRE(stages.ok());
  REQUIRE(stages->size() == b.size() - 1);
  for (std::size_t s = 0; s + 1 < b.size(); ++s) {
    const param_set& p = (*stages)[s];
    REQUIRE(p.first_block() == b[s]);
    REQUIRE(p.end_block() == b[s + 1]);
    REQUIRE(p.type() == whole.type());
    for (const param_entry& e : p.entries()) {
      const param_entry* w = whole.find(e.name);
      REQUIRE(w != nullptr);
      REQUIRE(w->shape == e.shape);
      REQUIRE(w->block == e.block);
    }
    // The same values as initialising that range alone.
    REQUIRE(same_bytes(p, m.init_params(7, b[s], b[s + 1])));
  }
  auto joined = join_params(snapshots(std::move(*stages)));
  REQUIRE(joined.ok());
  REQUIRE(same_bytes(*joined, whole));
}

}  // namespace

TEST_CASE("split then join gives back the mlp's parameters bit for bit", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 12, .hidden = {16, 8}, .classes = 4});
  REQUIRE(m.size() == 3);
  check_round_trip(m, {0, 3});
  check_round_trip(m, {0, 1, 3});
  check_round_trip(m, {0, 2, 3});
  check_round_trip(m, {0, 1, 2, 3});
}

TEST_CASE("split then join gives back gpt-tiny's parameters bit for bit", "[ops]") {
  model<float> m = build_model<float>(parse_model_spec("gpt-tiny").value());
  const int n = m.size();
  REQUIRE(n >= 3);
  check_round_trip(m, {0, n});
  check_round_trip(m, {0, 1, n});
  check_round_trip(m, {0, 1, n - 1, n});
  std::vector<int> every;
  for (int b = 0; b <= n; ++b) every.push_back(b);
  check_round_trip(m, every);
}

TEST_CASE("split_params refuses boundaries that do not cover the blocks", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 6, .hidden = {5, 4}, .classes = 3});
  const param_set whole = m.init_params(1);
  auto none = split_params(whole, {0});
  REQUIRE_FALSE(none.ok());
  REQUIRE_THAT(none.message(), Catch::Contains("at least a first and an end block"));
  auto late = split_params(whole, {1, 3});
  REQUIRE_FALSE(late.ok());
  REQUIRE_THAT(late.message(), Catch::Contains("must start at block 0 and end at block 3"));
  auto short_end = split_params(whole, {0, 2});
  REQUIRE_FALSE(short_end.ok());
  REQUIRE_THAT(short_end.message(), Catch::Contains("end at block 3"));
  auto empty_stage = split_params(whole, {0, 1, 1, 3});
  REQUIRE_FALSE(empty_stage.ok());
  REQUIRE_THAT(empty_stage.message(), Catch::Contains("stage 1 would get no blocks"));
  auto backwards = split_params(whole, {0, 2, 1, 3});
  REQUIRE_FALSE(backwards.ok());
  REQUIRE_THAT(backwards.message(), Catch::Contains("increase strictly"));
}

TEST_CASE("split_params works on a param_set that starts past block 0", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 6, .hidden = {5, 4}, .classes = 3});
  const param_set tail = m.init_params(3, 1, 3);
  auto stages = split_params(tail, {1, 2, 3});
  REQUIRE(stages.ok());
  REQUIRE(same_bytes((*stages)[1], m.init_params(3, 2, 3)));
  REQUIRE_FALSE(split_params(tail, {0, 2, 3}).ok());
}

TEST_CASE("join_params refuses gaps, overlaps, mixed dtypes and empty input", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 6, .hidden = {5, 4}, .classes = 3});
  model<float> mf = make_mlp<float>({.inputs = 6, .hidden = {5, 4}, .classes = 3});
  auto snap = [](param_set p) { return std::make_shared<const param_set>(std::move(p)); };

  REQUIRE_FALSE(join_params({}).ok());
  auto gap = join_params({snap(m.init_params(1, 0, 1)), snap(m.init_params(1, 2, 3))});
  REQUIRE_FALSE(gap.ok());
  REQUIRE_THAT(gap.message(), Catch::Contains("a gap"));
  auto overlap = join_params({snap(m.init_params(1, 0, 2)), snap(m.init_params(1, 1, 3))});
  REQUIRE_FALSE(overlap.ok());
  REQUIRE_THAT(overlap.message(), Catch::Contains("an overlap"));
  auto mixed = join_params({snap(m.init_params(1, 0, 1)), snap(mf.init_params(1, 1, 3))});
  REQUIRE_FALSE(mixed.ok());
  REQUIRE_THAT(mixed.message(), Catch::Contains("F32"));
  REQUIRE_FALSE(join_params({snap(m.init_params(1, 0, 1)), nullptr}).ok());
  // A tail of the model joins into a param_set that starts where the first stage does.
  auto tail = join_params({snap(m.init_params(1, 1, 2)), snap(m.init_params(1, 2, 3))});
  REQUIRE(tail.ok());
  REQUIRE(same_bytes(*tail, m.init_params(1, 1, 3)));
}
