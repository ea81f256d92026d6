// Tests for train_pipeline: pipelined weights equal the single-device trainer's (detached and
// scheduled ranks, replicated stages), `--schedule none`, the trace (and its bytes), bad plans
// and faults.
#include "actors/pipeline.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/explorer.hpp"

#include "tests/actors/fixtures.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

TEST_CASE("1f1b p=2 m=4 gives the weights of the single-device trainer", "[actors]") {
  const model<float> net = small_mlp();
  const param_set initial = net.init_params(7);
  const param_snapshot want = reference_weights(net, initial, sgd(3), 4);
  for (bool detached : {true, false}) {
    CAPTURE(detached);
    run_plan o = one_f_one_b(2, 4, 3);
    o.detached = detached;
    int calls = 0;
    pipeline_callbacks cb;
    cb.on_step = [&](const step_metrics& s) {
      ++calls;
      CHECK(s.step == calls);
      CHECK(s.steps == 3);
      CHECK(std::isfinite(s.loss));
      CHECK(s.grad_norm > 0);
      CHECK(s.samples == 16 * calls);
    };
    auto r = train_pipeline<float>(net, initial, o, synthetic_data(), cb);
    REQUIRE(r.ok());
    CHECK(calls == 3);
    CHECK(r->steps_done == 3);
    CHECK_FALSE(r->interrupted);
    REQUIRE(r->weights.size() == 2);
    CHECK(r->boundaries.front() == 0);
    CHECK(r->boundaries.back() == net.size());
    REQUIRE(r->stages.size() == 2);
    for (const stage_stats& s : r->stages) CHECK(s.steps == 3);
    CHECK(relative_difference(r->weights, *want) < 1e-5);
  }
}

TEST_CASE("two replicas of every stage train like one device with w * m microbatches",
          "[actors]") {
  const model<float> net = small_mlp();
  const param_set initial = net.init_params(11);
  const param_snapshot want = reference_weights(net, initial, sgd(2), 8);
  run_plan o = one_f_one_b(2, 4, 2);
  o.replicas = 2;
  o.threads_per_stage = 2;
  auto r = train_pipeline<float>(net, initial, o, synthetic_data());
  REQUIRE(r.ok());
  CHECK(r->steps_done == 2);
  CHECK(relative_difference(r->weights, *want) < 1e-5);
}

TEST_CASE("an explicit split is used as given", "[actors]") {
  const model<float> net = small_mlp();
  const param_set initial = net.init_params(3);
  run_plan o = one_f_one_b(2, 2, 1);
  o.split = {0, 2};
  auto r = train_pipeline<float>(net, initial, o, synthetic_data());
  REQUIRE(r.ok());
  CHECK(r->boundaries == std::vector<int>{0, 2, 3});
  CHECK(r->weights[0]->block_count() == 2);
}

TEST_CASE("without a schedule the single-device trainer runs", "[actors]") {
  const model<float> net = small_mlp();
  const param_set initial = net.init_params(5);
  const param_snapshot want = reference_weights(net, initial, sgd(2), 4);
  run_plan o = one_f_one_b(1, 4, 2);
  o.schedule = std::nullopt;
  o.weights_every = 1;
  int snapshots = 0;
  pipeline_callbacks cb;
  cb.on_weights = [&](std::shared_ptr<const model_weights> w) {
    ++snapshots;
    CHECK(w->size() == 1);
  };
  auto r = train_pipeline<float>(net, initial, o, synthetic_data(), cb);
  REQUIRE(r.ok());
  CHECK(snapshots == 2);
  CHECK(r->programs == nullptr);
  REQUIRE(r->weights.size() == 1);
  CHECK(relative_difference(r->weights, *want) == 0);
}

TEST_CASE("a recorded trace holds every rank's compute and communication", "[actors]") {
  const model<float> net = small_mlp();
  run_plan o = one_f_one_b(2, 4, 2);
  auto r = train_pipeline<float>(net, net.init_params(1), o, synthetic_data(), {}, {.record_trace = true});
  REQUIRE(r.ok());
  CHECK(r->trace.ranks == 2);
  CHECK(r->trace.devices_per_replica == 2);
  int forwards[2] = {0, 0}, sends = 0;
  for (const timeline_event& e : r->trace.events) {
    REQUIRE((e.rank == 0 || e.rank == 1));
    CHECK(e.end >= e.start);
    if (e.act.kind == action_kind::forward) ++forwards[e.rank];
    if (e.stream == stream_kind::send) ++sends;
  }
  CHECK(forwards[0] == 8);
  CHECK(forwards[1] == 8);
  CHECK(sends == 16);  // 8 activations forward, 8 gradients back
  CHECK(std::is_sorted(r->trace.events.begin(), r->trace.events.end(),
                       [](const auto& a, const auto& b) { return a.start < b.start; }));
  // Each F, B and STEP records bytes (its stash's, its version's): the explorer's page of the
  // trace holds each rank's stashes at them, and their peak is the one the stage measured.
  for (const timeline_event& e : r->trace.events) {
    INFO(to_string(e.act) << " on rank " << e.rank);
    const action_kind k = e.act.kind;
    if (k == action_kind::forward || k == action_kind::backward || k == action_kind::step)
      CHECK(e.bytes > 0);
    if (e.stream != stream_kind::compute) CHECK(e.bytes == -1);
  }
  const auto page = nlohmann::json::parse(explorer_json(r->trace).value());
  REQUIRE(r->stages.size() == 2);
  for (int s = 0; s < 2; ++s)
    CHECK(page["ranks"][s]["peak_stash_bytes"] == r->stages[s].peak_activation_bytes);
}

TEST_CASE("train_pipeline refuses a bad plan or fault with a message that says why", "[actors]") {
  const model<float> net = small_mlp();
  auto refused = [&](const run_plan& o, const pipeline_hooks& hooks = {}) {
    auto r = train_pipeline<float>(net, net.init_params(1), o, synthetic_data(), {}, hooks);
    REQUIRE_FALSE(r.ok());
    return r.message();
  };
  run_plan o = one_f_one_b(2, 4, 1);
  o.stages = 4;
  CHECK_THAT(refused(o), Catch::Contains("3 blocks"));
  o = one_f_one_b(2, 4, 1);
  o.split = {0, 3};
  CHECK_THAT(refused(o), Catch::Contains("split"));
  o.split = {1, 2};
  CHECK_THAT(refused(o), Catch::Contains("block 0"));
  o = one_f_one_b(2, 4, 1);
  o.schedule = std::nullopt;
  o.replicas = 2;
  CHECK_THAT(refused(o), Catch::Contains("schedule.replicas"));
  o = one_f_one_b(2, 4, 1);
  pipeline_hooks kill;
  kill.fault.kind = fault_kind::kill;
  kill.fault.at = action{5, action_kind::forward, 0};
  CHECK_THAT(refused(o, kill), Catch::Contains("stage 5"));
  o = one_f_one_b(2, 0, 1);
  CHECK_THAT(refused(o), Catch::Contains("schedule.microbatches"));
}

TEST_CASE("a minibatch that does not split w * m ways ends the run with an error", "[actors]") {
  const model<float> net = small_mlp();
  run_plan o = one_f_one_b(2, 3, 1);
  o.data.batch = 18;  // the plan is consistent; the data gives 16 rows
  auto r = train_pipeline<float>(net, net.init_params(1), o, synthetic_data(16));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.message(), Catch::Contains("step 1"));
}

TEST_CASE("throttled ranks train to the same weights as full-speed ones", "[actors]") {
  // Throttling only stretches time: a flush schedule's weights stay those of one device.
  const model<float> net = small_mlp();
  const param_set initial = net.init_params(5);
  const param_snapshot want = reference_weights(net, initial, sgd(2), 4);
  run_plan o = one_f_one_b(2, 4, 2);
  o.ranks = {rank_placement{"cpu", 1.0, "", 0}, rank_placement{"cpu", 0.25, "", 0}};
  auto r = train_pipeline<float>(net, initial, o, synthetic_data(), {}, {.record_trace = true});
  REQUIRE(r.ok());
  CHECK(relative_difference(r->weights, *want) < 1e-5);
  int computes = 0;
  for (const auto& e : r->trace.events)
    if (e.stream == stream_kind::compute) ++computes;
  CHECK(computes == 2 * (4 + 4 + 1) * 2);  // 2 ranks x (F, B per microbatch and a STEP) x 2 steps
}

TEST_CASE("check refuses device speeds of the wrong count or outside 0 to 1", "[actors]") {
  run_plan o = one_f_one_b(2, 4, 1);
  auto at = [](double speed) { return rank_placement{"cpu", speed, "", 0}; };
  o.ranks = {at(1.0)};
  CHECK_THAT(check(o, 3).message(), Catch::Contains("2 ranks"));
  o.ranks = {at(0.5), at(1.5)};
  CHECK_THAT(check(o, 3).message(), Catch::Contains("ranks[1].speed"));
  o.ranks = {at(0.0), at(1.0)};
  CHECK_THAT(check(o, 3).message(), Catch::Contains("ranks[0].speed"));
  o.ranks = {at(0.5), at(0.25)};
  CHECK(check(o, 3).ok());
  o.schedule = std::nullopt;
  o.stages = 1;
  o.ranks = {at(0.5)};
  CHECK_THAT(check(o, 3).message(), Catch::Contains("pipeline schedule"));
}

TEST_CASE("a library model that the plan's model spec does not describe trains as given", "[actors]") {
  // Four blocks, while the plan's (default) model spec would build three: the run checks the
  // plan against the model it is given, not against the spec.
  const model<float> net = make_mlp<float>(mlp_config{12, {16, 8, 8}, 4});
  run_plan o = one_f_one_b(4, 4, 2);
  o.model = model_spec{};
  auto r = train_pipeline<float>(net, net.init_params(3), o, synthetic_data());
  INFO((r.ok() ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(r->boundaries == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(r->steps_done == 2);
}
