// The run plan: check() names the field of every problem, the JSON round trip is exact, and
// unknown, missing or mistyped fields are refused with the field's path.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/run_plan.hpp"

using namespace pipeworks;

namespace {

run_plan gpt_plan() {
  run_plan p;
  p.model = *parse_model_spec("gpt-tiny");
  p.schedule = schedule_kind::two_bw;
  p.stages = 2;
  p.train.microbatches = 4;
  p.train.steps = 10;
  p.train.optim = default_optimizer_config(optimizer_kind::adamw);
  p.train.optim.lr = 3e-3 / 7;  // not a short decimal: the round trip must keep every bit
  p.train.min_lr = 1e-4;
  p.train.warmup_steps = 2;
  p.train.clip_grad_norm = 1.0;
  p.split = {0, 2};
  p.data = {data_source::text, "/usr/share/games/fortunes", 8, 0xfedcba9876543210ULL, 0};
  p.checkpoint = {5, "ckpt", 2};
  return p;
}

std::string field_of(const run_plan& p) {
  auto i = first_issue(p);
  return i ? i->field : "";
}

}  // namespace

TEST_CASE("a good plan has no issue") {
  CHECK(check(gpt_plan()).ok());
  run_plan none;
  none.model = *parse_model_spec("mlp");
  none.schedule.reset();
  CHECK(check(none).ok());
}

TEST_CASE("check names the field of each problem") {
  run_plan p = gpt_plan();
  p.stages = 0;
  CHECK(field_of(p) == "schedule.stages");
  p = gpt_plan();
  p.data.batch = 6;  // not divisible by m * w = 4
  CHECK(field_of(p) == "data.batch");
  p = gpt_plan();
  p.split = {0, 9};
  CHECK(field_of(p) == "split");
  p = gpt_plan();
  p.stages = 5;  // gpt-tiny has 4 blocks
  p.split.clear();
  CHECK(field_of(p) == "schedule.stages");
  p = gpt_plan();
  p.train.warmup_steps = 10;
  CHECK(field_of(p) == "lr_schedule.warmup_steps");
  p = gpt_plan();
  p.schedule = schedule_kind::bfs;  // over 2 devices, 2 chunks and 8 microbatches BFS needs 4
  p.chunks = 2;
  p.train.microbatches = 8;
  p.split = {0, 1, 2, 3};
  p.credits = 3;
  CHECK(field_of(p) == "runtime.credits");
  p.credits = 4;
  CHECK(field_of(p) == "");
  p = gpt_plan();
  p.checkpoint.dir.clear();
  CHECK(field_of(p) == "checkpoint.dir");
  p = gpt_plan();
  p.ranks.assign(2, rank_placement{});
  p.ranks[1].speed = 1.5;
  CHECK(field_of(p) == "ranks[1].speed");
  p = gpt_plan();
  p.ranks.assign(2, rank_placement{});
  p.ranks[0].process = 1;
  CHECK(field_of(p) == "ranks[0].process");
  p = gpt_plan();
  p.data.source = data_source::fashion_mnist;
  CHECK(field_of(p) == "data.source");
  p = gpt_plan();
  p.schedule.reset();
  CHECK(field_of(p) == "schedule.kind");
  p = gpt_plan();
  p.split.clear();
  p.stages = 1;
  p.train.microbatches = 4;
  p.auto_partition = auto_partition_spec{planner_kind::two_bw, "local-cpu", false, false};
  p.schedule = schedule_kind::one_f_one_b;
  CHECK(field_of(p) == "auto_partition.planner");
}

TEST_CASE("render writes the other fields the caller's way") {
  run_plan p = gpt_plan();
  p.data.batch = 6;
  auto i = first_issue(p);
  REQUIRE(i);
  const std::string lib = render(*i, [](std::string_view f) { return std::string(f); });
  CHECK(lib == "data.batch: 6 is not divisible by schedule.microbatches x schedule.replicas = 4");
  const std::string cli = render(*i, [](std::string_view f) {
    return f == "data.batch" ? std::string("--batch")
                             : "--" + std::string(f.substr(f.find('.') + 1));
  });
  CHECK(cli == "--batch: 6 is not divisible by --microbatches x --replicas = 4");
}

TEST_CASE("the JSON round trip keeps every field and every bit") {
  run_plan p = gpt_plan();
  p.ranks.assign(2, rank_placement{"cpu", 0.25, "slow0", 0});
  p.ranks[1].speed = 1.0 / 3;
  p.weights_every = 3;
  p.bf16 = true;
  p.init_from = "init.safetensors";
  const std::string text = to_json_text(p);
  auto back = parse_run_plan(text, "plan.json");
  REQUIRE(back.ok());
  CHECK(to_json_text(*back) == text);
  CHECK(back->train.optim.lr == p.train.optim.lr);
  CHECK(back->ranks[1].speed == p.ranks[1].speed);
  CHECK(back->data.seed == p.data.seed);
  CHECK(back->bf16);
  CHECK_FALSE(back->tf32);
  CHECK(first_result_difference(p, *back).empty());
}

TEST_CASE("the JSON reader refuses unknown missing and mistyped fields naming them") {
  const nlohmann::json good = nlohmann::json::parse(to_json_text(gpt_plan()));
  auto refused = [](nlohmann::json j) {
    auto r = parse_run_plan(j.dump(), "plan.json");
    REQUIRE_FALSE(r.ok());
    return r.message();
  };
  nlohmann::json j = good;
  j["schedule"]["stagse"] = 2;
  CHECK_THAT(refused(j), Catch::Contains("plan.json") && Catch::Contains("stagse"));
  j = good;
  j["data"].erase("seed");
  CHECK_THAT(refused(j), Catch::Contains("data.seed is missing"));
  j = good;
  j["schedule"]["microbatches"] = "4";
  CHECK_THAT(refused(j), Catch::Contains("schedule.microbatches must be a whole number"));
  j = good;
  j["format"] = "something-else";
  CHECK_THAT(refused(j), Catch::Contains("not a pipeworks run plan"));
  j = good;
  j["clip"]["scope"] = "stage";  // 1F1B flushes: it clips the global norm
  j["schedule"]["kind"] = "1f1b";
  CHECK_THAT(refused(j), Catch::Contains("clip.scope"));
  j = good;
  j["schedule"]["stages"] = 3;  // the split names 2 stages
  CHECK_THAT(refused(j), Catch::Contains("split"));
  CHECK_FALSE(parse_run_plan("{", "plan.json").ok());
}

TEST_CASE("first_result_difference names what changes the results") {
  run_plan a = gpt_plan(), b = gpt_plan();
  b.data.position = 5;
  b.credits = 7;
  b.threads_per_stage = 2;
  CHECK(first_result_difference(a, b).empty());
  b.split = {0, 3};
  CHECK(first_result_difference(a, b) == "split");
  b = gpt_plan();
  b.train.optim.beta2 = 0.99;
  CHECK(first_result_difference(a, b) == "optimizer.beta2");
}
