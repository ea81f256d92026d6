// Tests for profile.json: exact round trips, and errors that name the field and the layer for
// missing, negative, non-finite or non-whole values, an empty layer list and a bad microbatch;
// the recompute mode and the stash each mode holds.
#include "partition/profile.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <limits>

using namespace pipeworks;

namespace {

model_profile sample() {
  model_profile p;
  p.model = "gpt-small";
  p.microbatch = 4;
  p.layers = {{"embedding", 0.1, 0.30000000000000004, 1 << 20, 0, 38597376, 77194752},
              {"block0", 1.0 / 3.0, 2.0 / 3.0, 1 << 20, 7 << 20, 7087872, 14175744},
              {"head", 1e-300, 1.7976931348623157e308, 0, 1,
               // the param_bytes total reaches max_profile_total_bytes exactly: still accepted
               max_profile_total_bytes - 38597376 - 7087872, 0}};
  return p;
}

bool same(const model_profile& a, const model_profile& b) {
  if (a.model != b.model || a.microbatch != b.microbatch || a.layers.size() != b.layers.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const layer_profile& x = a.layers[i];
    const layer_profile& y = b.layers[i];
    if (x.name != y.name || x.fwd_ms != y.fwd_ms || x.bwd_ms != y.bwd_ms ||
        x.activation_bytes != y.activation_bytes || x.saved_bytes != y.saved_bytes ||
        x.param_bytes != y.param_bytes || x.optimizer_bytes != y.optimizer_bytes) {
      return false;
    }
  }
  return true;
}

const char* good_layer =
    R"({"name": "b", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 3, "saved_bytes": 4,
        "param_bytes": 5, "optimizer_bytes": 6})";

std::string with_layer(const std::string& layer) {
  return R"({"model": "m", "microbatch": 2, "layers": [)" + std::string(good_layer) + ", " +
         layer + "]}";
}

// The error parse_profile gives for `text`; fails the test if it parses.
std::string error_of(const std::string& text) {
  auto p = parse_profile(text);
  REQUIRE_FALSE(p.ok());
  return p.message();
}

}  // namespace

TEST_CASE("profile: to_json and parse_profile round trip exactly", "[partition]") {
  const model_profile p = sample();
  auto back = parse_profile(to_json(p));
  REQUIRE(back.ok());
  CHECK(same(p, *back));
  CHECK(to_json(*back) == to_json(p));
}

TEST_CASE("profile: reads the documented form", "[partition]") {
  auto p = parse_profile(with_layer(R"({"name": "c", "fwd_ms": 0.5, "bwd_ms": 1e0,
      "activation_bytes": 8.0, "saved_bytes": 0, "param_bytes": 16, "optimizer_bytes": 32})"));
  REQUIRE(p.ok());
  CHECK(p->model == "m");
  CHECK(p->microbatch == 2);
  REQUIRE(p->layers.size() == 2);
  CHECK(p->layers[0].name == "b");
  CHECK(p->layers[0].optimizer_bytes == 6);
  CHECK(p->layers[1].fwd_ms == 0.5);
  CHECK(p->layers[1].bwd_ms == 1.0);
  CHECK(p->layers[1].activation_bytes == 8);
}

TEST_CASE("profile: errors name the field and the layer", "[partition]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": -1, "bwd_ms": 1,
      "activation_bytes": 0, "saved_bytes": 0, "param_bytes": 0, "optimizer_bytes": 0})")),
             Contains("layers[1] (\"c\").fwd_ms -1") && Contains(">= 0"));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": 1, "bwd_ms": 1e999,
      "activation_bytes": 0, "saved_bytes": 0, "param_bytes": 0, "optimizer_bytes": 0})")),
             Contains("not valid JSON") && Contains("1e999"));
  model_profile inf = sample();
  inf.layers[2].bwd_ms = std::numeric_limits<double>::infinity();  // written as null
  CHECK_THAT(error_of(to_json(inf)), Contains("layers[2] (\"head\").bwd_ms must be a number"));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": 1, "bwd_ms": 1,
      "activation_bytes": -8, "saved_bytes": 0, "param_bytes": 0, "optimizer_bytes": 0})")),
             Contains("layers[1] (\"c\").activation_bytes -8"));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": 1, "bwd_ms": 1,
      "activation_bytes": 0, "saved_bytes": 0.5, "param_bytes": 0, "optimizer_bytes": 0})")),
             Contains("saved_bytes 0.5") && Contains("whole number"));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": 1, "bwd_ms": 1,
      "activation_bytes": 0, "saved_bytes": 0, "param_bytes": 1e300, "optimizer_bytes": 0})")),
             Contains("param_bytes"));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": 1, "bwd_ms": 1,
      "activation_bytes": 0, "saved_bytes": 0, "param_bytes": 0})")),
             Contains("layers[1] (\"c\") has no \"optimizer_bytes\""));
  CHECK_THAT(error_of(with_layer(R"({"fwd_ms": 1})")), Contains("layers[1] has no \"name\""));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd_ms": "1"})")),
             Contains("layers[1] (\"c\").fwd_ms must be a number"));
  CHECK_THAT(error_of(with_layer(R"({"name": "c", "fwd": 1})")),
             Contains("unknown key \"fwd\" in layers[1]"));
  CHECK_THAT(error_of(with_layer("3")), Contains("layers[1] must be an object"));
}

TEST_CASE("profile: byte totals over the layers are capped at 2^50", "[partition]") {
  using Catch::Matchers::Contains;
  model_profile p = sample();
  REQUIRE(check_profile_totals(p).ok());
  // One byte over: the running total of param_bytes crosses 2^50 at the last layer.
  p.layers[2].param_bytes += 1;
  CHECK_THAT(check_profile_totals(p).message(),
             Contains("param_bytes") && Contains("layers[2] (\"head\")") && Contains("2^50") &&
                 Contains("1 PB"));
  CHECK_THAT(error_of(to_json(p)), Contains("total param_bytes") && Contains("layers[2]"));
  // A single field of 2^62 (read_whole's own bound) no longer passes.
  p = sample();
  p.layers[0].saved_bytes = std::int64_t{1} << 62;
  CHECK_THAT(error_of(to_json(p)), Contains("saved_bytes") && Contains("layers[0] (\"embedding\")"));
  // Totals cross where the sum does, not where one value is large.
  p = sample();
  p.layers[0].activation_bytes = max_profile_total_bytes / 2;
  p.layers[1].activation_bytes = max_profile_total_bytes / 2 + 1;
  CHECK_THAT(check_profile_totals(p).message(),
             Contains("activation_bytes over layers[0..1]") && Contains("layers[1] (\"block0\")"));
  p.layers[1].activation_bytes = -1;
  CHECK_THAT(check_profile_totals(p).message(), Contains("negative"));
}

TEST_CASE("profile: stash_product saturates instead of overflowing", "[partition]") {
  CHECK(stash_product(3, 7) == 21);
  CHECK(stash_product(0, 7) == 0);
  const std::int64_t cap = max_profile_total_bytes << 12;
  CHECK(stash_product(std::int64_t{1} << 40, max_profile_total_bytes) == cap);
  CHECK(stash_product(std::numeric_limits<int>::max(), std::int64_t{1} << 50) == cap);
}

TEST_CASE("profile: the top level is checked", "[partition]") {
  using Catch::Matchers::Contains;
  const std::string layers = std::string(R"("layers": [)") + good_layer + "]";
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 1, "layers": []})"),
             Contains("\"layers\" must be a non-empty array"));
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 1})"), Contains("has no \"layers\""));
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 0, )" + layers + "}"),
             Contains("microbatch 0") && Contains("1..2^62"));
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": -2, )" + layers + "}"),
             Contains("microbatch -2"));
  CHECK_THAT(error_of(R"({"model": "m", )" + layers + "}"), Contains("has no \"microbatch\""));
  CHECK_THAT(error_of(R"({"microbatch": 1, )" + layers + "}"), Contains("has no \"model\""));
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 1, "extra": 1, )" + layers + "}"),
             Contains("unknown key \"extra\""));
  CHECK_THAT(error_of("[1, 2]"), Contains("the top level must be an object"));
  CHECK_THAT(error_of("{\"model\": "), Contains("not valid JSON"));
  CHECK(parse_profile(R"({"model": "m", "microbatch": 1, )" + layers + "}").ok());
}

TEST_CASE("profile: load_profile reads a file and names the path in errors", "[partition]") {
  using Catch::Matchers::Contains;
  const std::string path = "pipeworks_profile_test.json";
  {
    std::ofstream out(path);
    out << to_json(sample());
  }
  auto p = load_profile(path);
  REQUIRE(p.ok());
  CHECK(same(*p, sample()));
  {
    std::ofstream out(path);
    out << R"({"model": "m", "microbatch": 0, "layers": []})";
  }
  auto bad = load_profile(path);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Contains(path + ": the top level.microbatch 0"));
  std::remove(path.c_str());
  auto missing = load_profile("no/such/profile.json");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Contains("no/such/profile.json"));
  auto dir = load_profile(".");
  REQUIRE_FALSE(dir.ok());
  CHECK_THAT(dir.message(), Contains("is a directory"));
}

TEST_CASE("profile: the recompute mode round trips and defaults to none", "[partition]") {
  using Catch::Matchers::Contains;
  // Profiles written before the field existed were measured without recomputation.
  auto old = parse_profile(with_layer(good_layer));
  REQUIRE(old.ok());
  CHECK(old->recompute == recompute_mode::none);
  CHECK_THAT(to_json(*old), Contains("\"recompute\": \"none\""));
  for (recompute_mode mode :
       {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
    model_profile p = sample();
    p.recompute = mode;
    auto back = parse_profile(to_json(p));
    REQUIRE(back.ok());
    CHECK(back->recompute == mode);
    CHECK(same(p, *back));
    CHECK(to_json(*back) == to_json(p));
  }
  auto full = parse_profile(R"({"model": "m", "microbatch": 2, "recompute": "full", "layers": [)" +
                            std::string(good_layer) + "]}");
  REQUIRE(full.ok());
  CHECK(full->recompute == recompute_mode::full);
}

TEST_CASE("profile: an unknown recompute mode is refused by name", "[partition]") {
  using Catch::Matchers::Contains;
  const std::string layers = std::string(R"("layers": [)") + good_layer + "]";
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 1, "recompute": "some", )" + layers + "}"),
             Contains("\"recompute\" is \"some\"") && Contains("none, selective, full"));
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 1, "recompute": 1, )" + layers + "}"),
             Contains("recompute"));
}

TEST_CASE("profile: input_bytes is the previous layer's output, 0 for the first", "[partition]") {
  const model_profile p = sample();
  CHECK(input_bytes(p, 0) == 0);
  CHECK(input_bytes(p, 1) == p.layers[0].activation_bytes);
  CHECK(input_bytes(p, 2) == p.layers[1].activation_bytes);
}

TEST_CASE("profile: stash_bytes per mode", "[partition]") {
  // none and selective: in_flight · Σsaved; full: in_flight · input + Σsaved (one microbatch).
  CHECK(stash_bytes(recompute_mode::none, 3, 1000, 10) == 3000);
  CHECK(stash_bytes(recompute_mode::selective, 3, 1000, 10) == 3000);
  CHECK(stash_bytes(recompute_mode::full, 3, 1000, 10) == 1030);
  CHECK(stash_bytes(recompute_mode::full, 0, 1000, 10) == 0);
  // A huge in_flight saturates rather than wrapping.
  CHECK(stash_bytes(recompute_mode::full, std::int64_t{1} << 40, 1, std::int64_t{1} << 40) >
        (std::int64_t{1} << 60));
}

TEST_CASE("profile: every mode's figures round trip", "[partition][recompute]") {
  using Catch::Matchers::Contains;
  model_profile p = sample();
  for (layer_profile& l : p.layers) {
    l.other_modes[recompute_mode::selective] = {l.bwd_ms / 3.0, l.saved_bytes / 2};
    l.other_modes[recompute_mode::full] = {l.bwd_ms / 2.0, l.saved_bytes};
  }
  const std::string text = to_json(p);
  CHECK_THAT(text, Contains("\"modes\"") && Contains("\"selective\"") && Contains("\"full\""));
  auto back = parse_profile(text);
  REQUIRE(back.ok());
  CHECK(same(p, *back));
  for (std::size_t i = 0; i < p.layers.size(); ++i)
    CHECK(back->layers[i].other_modes == p.layers[i].other_modes);
  CHECK(to_json(*back) == text);
  CHECK(profile_modes(*back).size() == 3);
  // A profile of one mode writes no "modes" at all, as before.
  CHECK(to_json(sample()).find("\"modes\"") == std::string::npos);
}

TEST_CASE("profile: the modes of each layer are checked", "[partition][recompute]") {
  using Catch::Matchers::Contains;
  const std::string sel = R"("modes": {"selective": {"bwd_ms": 3, "saved_bytes": 1}})";
  const std::string layer_sel =
      R"({"name": "c", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 3, "saved_bytes": 4,
          "param_bytes": 5, "optimizer_bytes": 6, )" + sel + "}";
  // The first layer carries none, the second selective: every layer must carry the same.
  CHECK_THAT(error_of(with_layer(layer_sel)), Contains("layers[1]") &&
                                                  Contains("every layer must carry the same modes"));
  auto both = parse_profile(R"({"model": "m", "microbatch": 2, "layers": [)" + layer_sel + ", " +
                            layer_sel + "]}");
  REQUIRE(both.ok());
  CHECK(both->layers[1].other_modes.at(recompute_mode::selective) == mode_figures{3, 1});
  // The profile's own mode, an unknown one, a missing or an extra field.
  CHECK_THAT(error_of(R"({"model": "m", "microbatch": 2, "recompute": "selective", "layers": [)" +
                      layer_sel + "]}"),
             Contains("modes names \"selective\""));
  auto with_modes = [](const std::string& modes) {
    return R"({"model": "m", "microbatch": 2, "layers": [{"name": "c", "fwd_ms": 1, "bwd_ms": 2,
      "activation_bytes": 3, "saved_bytes": 4, "param_bytes": 5, "optimizer_bytes": 6,
      "modes": )" + modes + "}]}";
  };
  CHECK_THAT(error_of(with_modes(R"({"some": {"bwd_ms": 1, "saved_bytes": 1}})")),
             Contains("\"some\""));
  CHECK_THAT(error_of(with_modes(R"({"full": {"bwd_ms": 1}})")), Contains("saved_bytes"));
  CHECK_THAT(error_of(with_modes(R"({"full": {"bwd_ms": -1, "saved_bytes": 1}})")),
             Contains("bwd_ms"));
  CHECK_THAT(error_of(with_modes(R"({"full": {"bwd_ms": 1, "saved_bytes": 1, "x": 2}})")),
             Contains("x"));
  CHECK_THAT(error_of(with_modes("[1]")), Contains("modes must be an object"));
}

TEST_CASE("profile: merge_modes puts other profiles' figures beside the first's",
          "[partition][recompute]") {
  using Catch::Matchers::Contains;
  model_profile none = sample();
  model_profile full = sample();
  full.recompute = recompute_mode::full;
  full.layers[1].bwd_ms = 5;
  auto merged = merge_modes(none, {full});
  REQUIRE(merged.ok());
  CHECK(merged->layers[1].other_modes.at(recompute_mode::full).bwd_ms == 5);
  CHECK(profile_in_mode(*merged, recompute_mode::full).layers[1].bwd_ms == 5);
  CHECK(profile_in_mode(*merged, recompute_mode::none).layers[1].bwd_ms == none.layers[1].bwd_ms);
  // A recomputing backward timed faster than none's is raised to none's.
  model_profile quick = sample();
  quick.recompute = recompute_mode::selective;
  quick.layers[1].bwd_ms = none.layers[1].bwd_ms / 2;
  auto raised = merge_modes(none, {quick});
  REQUIRE(raised.ok());
  CHECK(raised->layers[1].other_modes.at(recompute_mode::selective).bwd_ms ==
        none.layers[1].bwd_ms);
  auto twice = merge_modes(none, {full, full});
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.message(), Contains("two profiles measured in recompute full"));
  model_profile other = full;
  other.layers.pop_back();
  auto shorter = merge_modes(none, {other});
  REQUIRE_FALSE(shorter.ok());
  CHECK_THAT(shorter.message(), Contains("layers"));
}

TEST_CASE("profile: more layers than the planners split is refused naming the count", "[partition]") {
  std::string layers;
  for (std::size_t i = 0; i <= max_profile_layers; ++i) layers += (i ? ", " : "") + std::string(good_layer);
  const std::string err = error_of(R"({"model": "m", "microbatch": 2, "layers": [)" + layers + "]}");
  CHECK_THAT(err, Catch::Contains("\"layers\" has 1025 entries"));
  CHECK_THAT(err, Catch::Contains("at most 1024"));
}
