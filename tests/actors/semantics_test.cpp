// The semantics test on CAF actors: every schedule, run by stage actors on their own threads (and
// on CAF's scheduler), ends with the weights of the sequential reference that applies the
// schedule's version rule literally (runtime/exec/reference.hpp), within 1e-5 in fp32.
#include <catch2/catch.hpp>
#include <memory>

#include "actors/pipeline.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_split.hpp"
#include "runtime/exec/reference.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

// Returns whether the generator permits the case (and so whether it ran).
bool check_on_actors(const semantics_case& c, bool detached) {
  auto made = make_schedule(c.kind, c.params(steps));
  if (!made) return false;  // not permitted for these parameters
  const int S = made->virtual_stages;
  model<float> mdl = c.gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  const param_set initial = mdl.init_params(7);
  std::vector<int> split;  // the model's stages: one route's (dualpipe holds each twice)
  const int L = made->route_stages();
  for (int s = 0; s < L; ++s) split.push_back(s * mdl.size() / L);
  std::vector<int> bounds = split;
  bounds.push_back(mdl.size());
  const train_config cfg = semantics_train(steps, c.m, c.gpt);
  const std::int64_t B = 2 * c.m * c.w;
  minibatch_fn data = [&](std::int64_t t) -> result<minibatch> {
    return semantics_data(c.gpt, B, t, dtype::f32);
  };
  run_plan o;
  o.model = c.gpt ? model_spec{"tiny-gpt", tiny_gpt(S)} : model_spec{"small-mlp", small_mlp()};
  o.schedule = c.kind;
  o.stages = c.p;
  o.replicas = c.w;
  o.reduce = c.reduce;
  o.chunks = c.v;
  o.split = split;
  o.train = cfg;
  o.detached = detached;
  o.data.batch = B;
  INFO(c.name() << (detached ? " (detached)" : " (scheduled)"));
  auto run = train_pipeline<float>(mdl, initial, o, data);
  REQUIRE(run.ok());
  auto ref = reference_train(mdl, *made, bounds, initial, cfg, data);
  REQUIRE(ref.ok());
  REQUIRE(static_cast<int>(run->weights.size()) == L);  // the saved model's stages
  for (int s = 0; s < L; ++s) {
    INFO("virtual stage " << s);
    CHECK(max_relative_difference<float>(*run->weights[s], (*ref)[s]) <= 1e-5);
  }
  return true;
}

}  // namespace

TEST_CASE("on actors, every schedule equals its sequential reference: mlp", "[actors][semantics]") {
  int ran = 0;
  for (const auto& c : semantics_grid(false)) ran += check_on_actors(c, true);
  CHECK(ran >= 150);
}

TEST_CASE("on actors, cyclic with the p2p reduce equals its sequential reference: mlp",
          "[actors][semantics]") {
  int ran = 0;
  for (const auto& c : p2p_grid(false)) ran += check_on_actors(c, c.m % 2 == 0);
  CHECK(ran == static_cast<int>(p2p_grid(false).size()));
}

TEST_CASE("on actors scheduled by CAF, every schedule equals its reference: mlp",
          "[actors][semantics]") {
  int ran = 0;
  for (const auto& c : semantics_grid(false))
    if (c.m == c.p) ran += check_on_actors(c, false);
  CHECK(ran >= 40);
}

TEST_CASE("on actors, every schedule equals its sequential reference: gpt-tiny",
          "[actors][semantics][slow]") {
  int ran = 0;
  for (const auto& c : semantics_grid(true)) ran += check_on_actors(c, true);
  CHECK(ran >= 150);
}
