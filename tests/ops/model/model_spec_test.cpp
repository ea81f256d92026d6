// Tests for model specs: named models, JSON files, and clear errors for bad ones.
#include "ops/model/model_spec.hpp"
#include "tests/scratch_dir.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace pipeworks;

TEST_CASE("named models parse", "[ops]") {
  REQUIRE(parse_model_spec("gpt-small")->gpt() == gpt_small());
  REQUIRE(parse_model_spec("gpt-tiny")->gpt() == gpt_tiny());
  REQUIRE_FALSE(parse_model_spec("mlp")->is_gpt());
  auto bad = parse_model_spec("gpt-huge");
  REQUIRE_FALSE(bad.ok());
  REQUIRE_THAT(bad.message(), Catch::Contains("gpt-huge") && Catch::Contains("gpt-small"));
}

TEST_CASE("the example model files parse", "[ops]") {
  auto g = parse_model_spec(PIPEWORKS_SOURCE_DIR "/models/gpt-mini.json");
  REQUIRE(g.ok());
  REQUIRE(g->gpt() == gpt_config{.context = 64, .layers = 4, .heads = 4, .width = 128});
  auto m = parse_model_spec(PIPEWORKS_SOURCE_DIR "/models/mlp-wide.json");
  REQUIRE(m.ok());
  REQUIRE(m->mlp().hidden == std::vector<int>{512, 256});
  REQUIRE(build_model<float>(*m).size() == 3);
}

TEST_CASE("JSON specs round-trip and bad ones name the problem", "[ops]") {
  model_spec s = *parse_model_spec("gpt-small");
  auto back = model_spec_from_json(to_json(s), "x");
  REQUIRE(back->gpt() == gpt_small());
  auto bad = [](const char* text) {
    return model_spec_from_json(nlohmann::json::parse(text), "m.json").message();
  };
  REQUIRE_THAT(bad(R"({"type": "gpt", "width": 10, "heads": 4})"), Catch::Contains("multiple"));
  REQUIRE_THAT(bad(R"({"type": "gpt", "layerz": 3})"), Catch::Contains("layerz"));
  REQUIRE_THAT(bad(R"({"type": "gpt", "context": -1})"), Catch::Contains("context"));
  REQUIRE_THAT(bad(R"({"type": "rnn"})"), Catch::Contains("type"));
  REQUIRE_THAT(bad(R"({"type": "mlp", "hidden": [0]})"), Catch::Contains("hidden"));
  const test::scratch_dir scratch("pipeworks-model-spec-test");
  const std::string path = scratch / "bad_model.json";
  std::ofstream(path) << "{not json";
  REQUIRE_THAT(parse_model_spec(path).message(), Catch::Contains("not valid JSON"));
  REQUIRE_THAT(parse_model_spec("/no/such/model.json").message(),
               Catch::Contains("/no/such/model.json"));
}

TEST_CASE("JSON specs too large to index, or with widths past int, are refused", "[ops]") {
  auto bad = [](const char* text) {
    return model_spec_from_json(nlohmann::json::parse(text), "m.json").message();
  };
  // 2^20 layers of width 2^20: about 1.4e19 parameters, which overflows an int64 count.
  REQUIRE_THAT(bad(R"({"type": "gpt", "width": 1048576, "layers": 1048576})"),
               Catch::Contains("parameters") && Catch::Contains("lower width"));
  // ... and says so as a positive count, not one wrapped to a negative.
  REQUIRE_THAT(bad(R"({"type": "gpt", "width": 1048576, "layers": 1048576})"),
               Catch::Contains("about 1.38e+19 parameters") && !Catch::Contains("about -"));
  // 2^32 + 1 must not wrap to a hidden width of 1.
  REQUIRE_THAT(bad(R"({"type": "mlp", "hidden": [4294967297]})"),
               Catch::Contains("hidden") && Catch::Contains("4294967297"));
  REQUIRE_THAT(bad(R"({"type": "mlp", "hidden": [1000000, 1000000]})"),
               Catch::Contains("parameters") && Catch::Contains("hidden widths"));
  REQUIRE_THAT(bad(R"({"type": "gpt", "context": 2.5})"), Catch::Contains("context"));
  REQUIRE_THAT(bad(R"({"type": "gpt", "context": 64, "layers": 2, "heads": 2})"),
               Catch::Contains("\"width\" is missing"));
  REQUIRE_THAT(bad(R"({"type": "gpt", "heads": 99999999999})"), Catch::Contains("heads"));
  REQUIRE(model_spec_from_json(nlohmann::json::parse(R"({"type": "mlp", "hidden": [1048576]})"),
                               "m.json")
              .ok());
}
