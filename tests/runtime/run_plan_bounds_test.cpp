// Issue 31, item 8: the run plan's reader requires every documented field and bounds every number;
// each bad plan is refused with a message naming the field and what it allows.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "runtime/run_plan.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using json = nlohmann::json;

namespace {

// Two throttled CPU ranks of gpt-tiny under 1F1B: a plan that reads and checks.
run_plan two_rank_plan() {
  run_plan p;
  p.model = *parse_model_spec("gpt-tiny");
  p.schedule = schedule_kind::one_f_one_b;
  p.stages = 2;
  p.train.microbatches = 4;
  p.train.steps = 10;
  p.split = {0, 2};
  p.ranks = {rank_placement{{}, 0.5, "a", 0}, rank_placement{{}, 0.25, "b", 0}};
  p.data = {data_source::text, "/usr/share/games/fortunes", 8, 1, 0};
  return p;
}

const json good = json::parse(to_json_text(two_rank_plan()));

// The message parse_run_plan refuses j with (fails the test when it reads).
std::string refused(const json& j) {
  auto r = parse_run_plan(j.dump(), "plan.json");
  if (r.ok()) FAIL("read: " + j.dump());
  return r.message();
}

}  // namespace

TEST_CASE("the plan under test reads", "[run_plan]") {
  auto r = parse_run_plan(good.dump(), "plan.json");
  if (!r) FAIL(r.message());
}

TEST_CASE("device speeds outside 1e-06 to 1 are refused naming the rank and the range", "[run_plan]") {
  for (double s : {1e-30, 1e-20, 1e-17, 1e-7, 0.0, -1.0, 1.5, 1e300}) {
    json j = good;
    j["ranks"][1]["speed"] = s;
    INFO(s);
    CHECK_THAT(refused(j), Catch::Contains("ranks[1].speed") && Catch::Contains("[1e-06, 1]"));
  }
  json j = good;
  j["ranks"][1]["speed"] = 1e-6;
  CHECK(parse_run_plan(j.dump(), "plan.json").ok());
}

TEST_CASE("every documented field is required model vocab and processes transport too", "[run_plan]") {
  json j = good;
  j["model"].erase("vocab");
  CHECK_THAT(refused(j), Catch::Contains("model.vocab is missing"));
  j = good;
  j["processes"].erase("transport");
  CHECK_THAT(refused(j), Catch::Contains("processes.transport is missing"));
  j = good;
  j.erase("processes");
  CHECK_THAT(refused(j), Catch::Contains("processes is missing"));
  j = good;
  j["runtime"].erase("bf16");
  CHECK_THAT(refused(j), Catch::Contains("runtime.bf16 is missing"));
  const json mlp = json::parse([] {
    run_plan p;
    p.model = *parse_model_spec("mlp");
    return to_json_text(p);
  }());
  for (const char* k : {"hidden", "inputs", "classes"}) {
    j = mlp;
    j["model"].erase(k);
    CHECK_THAT(refused(j), Catch::Contains(std::string("model.") + k + " is missing"));
  }
}

TEST_CASE("an empty model name in a plan file or a preset name on other fields is refused naming model.name",
          "[run_plan]") {
  test::scratch_dir d("pipeworks-plan-name");
  json j = good;
  j["model"]["name"] = "";
  const std::string path = (d.path() / "plan.json").string();
  std::ofstream(path) << j.dump();
  auto r = load_run_plan(path);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.message(), Catch::Contains(path + ": model.name must be the model's name"));
  CHECK(parse_run_plan(j.dump(), "a library run's checkpoint").ok());  // its own model, unnamed
  j["model"]["name"] = "gpt\n";
  CHECK_THAT(refused(j), Catch::Contains("model.name must be the model's name"));
  j = good;
  j["model"]["name"] = "gpt-small";  // the fields are gpt-tiny's
  CHECK_THAT(refused(j), Catch::Contains("model.name is \"gpt-small\", but the fields are not"));
  j = good;
  j["model"]["name"] = "mlp";
  CHECK_THAT(refused(j), Catch::Contains("model.name"));
  j = good;
  j["model"]["name"] = "models/gpt-mini.json";  // a model file's path names any fields
  CHECK(parse_run_plan(j.dump(), "plan.json").ok());
}

TEST_CASE("optimizer numbers out of range are refused naming the field and the range", "[run_plan]") {
  struct bad_case {
    const char* field;
    double value;
    std::string says;
  };
  const std::vector<bad_case> cases{
      {"eps", 1e300, "optimizer.eps: must be in (0, 1)"},
      {"eps", 0.0, "optimizer.eps: must be in (0, 1)"},
      {"eps", -1e-8, "optimizer.eps: must be in (0, 1)"},
      {"momentum", 1e300, "optimizer.momentum: must be in [0, 1)"},
      {"momentum", -1e300, "optimizer.momentum: must be in [0, 1)"},
      {"momentum", 1.0, "optimizer.momentum: must be in [0, 1)"},
      {"beta1", 2.0, "optimizer.beta1: must be in [0, 1)"},
      {"beta2", -0.5, "optimizer.beta2: must be in [0, 1)"},
      {"lr", 0.0, "optimizer.lr: must be a positive number"},
      {"lr", -1e300, "optimizer.lr: must be a positive number"},
      {"weight_decay", 1e300, "optimizer.weight_decay: must be in [0, 1]"},
      {"weight_decay", -1.0, "optimizer.weight_decay: must be 0 or positive"},
  };
  for (const char* kind : {"sgd", "adamw"})  // bounded whichever kind reads them
    for (const bad_case& c : cases) {
      json j = good;
      j["optimizer"]["kind"] = kind;
      j["optimizer"][c.field] = c.value;
      INFO(kind << " " << c.field << " " << c.value);
      CHECK_THAT(refused(j), Catch::Contains("plan.json: " + c.says));
    }
}

TEST_CASE("positions outside 0 to the steps are refused and a plan file resuming needs a directory",
          "[run_plan]") {
  json j = good;
  j["data"]["position"] = 11;
  CHECK_THAT(refused(j), Catch::Contains("data.position: must be in 0..schedule.steps 10"));
  j["data"]["position"] = -1;
  CHECK_THAT(refused(j), Catch::Contains("data.position must be a whole number"));
  j = good;
  j["lr_schedule"]["warmup_steps"] = 10;
  CHECK_THAT(refused(j), Catch::Contains("lr_schedule.warmup_steps"));

  test::scratch_dir d("pipeworks-plan-position");
  j = good;
  j["data"]["position"] = 5;
  const std::string path = (d.path() / "plan.json").string();
  std::ofstream(path) << j.dump();
  auto r = load_run_plan(path);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.message(), Catch::Contains(path + ": data.position: is 5") &&
                              Catch::Contains("checkpoint.dir names no checkpoint directory"));
  j["checkpoint"]["dir"] = (d.path() / "ckpt").string();
  j["checkpoint"]["every"] = 2;
  std::ofstream(path) << j.dump();
  r = load_run_plan(path);
  if (!r) FAIL(r.message());
}
