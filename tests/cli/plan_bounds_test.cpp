// Issue 31, item 8, through the CLI: `train --plan` with a plan that is missing a field or holds a
// number out of range exits 2, naming the field and what it allows.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "fixtures.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

TEST_CASE("train --plan with a bad plan exits 2 naming the field", "[cli][plan]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text());
  const std::string good = dir / "good.json";
  REQUIRE(run_cli({"train", "--model", "gpt-tiny", "--data", text, "--schedule", "1f1b", "--stages",
                   "2", "--steps", "4", "--print-plan", good})
              .exit_code == 0);
  const json plan = json::parse(read_file(good));
  struct bad_case {
    std::string name;
    std::function<void(json&)> change;
    std::string says;
  };
  const json slow = {{"device", "cpu"}, {"speed", 1e-30}, {"name", ""}, {"process", 0}};
  const std::vector<bad_case> cases{
      {"speed", [&](json& j) { j["ranks"] = {slow, slow}; },
       "ranks[0].speed: is 1e-30, not in [1e-06, 1]"},
      {"vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab is missing"},
      {"transport", [](json& j) { j["processes"].erase("transport"); },
       "processes.transport is missing"},
      {"name", [](json& j) { j["model"]["name"] = ""; }, "model.name must be the model's name"},
      {"eps", [](json& j) { j["optimizer"]["eps"] = 1e300; }, "optimizer.eps: must be in (0, 1)"},
      {"momentum", [](json& j) { j["optimizer"]["momentum"] = -1e300; },
       "optimizer.momentum: must be in [0, 1)"},
      {"position", [](json& j) { j["data"]["position"] = 2; },
       "data.position: is 2, a resumed run's first step, but checkpoint.dir names no checkpoint"},
  };
  for (const bad_case& c : cases) {
    json j = plan;
    c.change(j);
    const std::string path = dir / (c.name + ".json");
    write_file(path, j.dump());
    const cli_result r = run_cli({"train", "--plan", path});
    INFO(c.name << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--plan: " + path + ": " + c.says));
  }
}
