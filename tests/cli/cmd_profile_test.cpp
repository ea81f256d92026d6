// `pipeworks profile`: writes profile.json with one entry per layer (and the recompute mode it
// was measured in), and names bad flags.
#include <map>
#include <string>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "partition/profile.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

TEST_CASE("profile gpt-tiny writes one entry per layer", "[cli]") {
  scratch_dir dir;
  const std::string out = dir / "profile.json";
  const cli_result r = run_cli({"profile", "--model", "gpt-tiny", "--microbatch", "2", "--repeats",
                                "2", "--out", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(read_file(out));
  CHECK(p["model"] == "gpt-tiny");
  CHECK(p["microbatch"] == 2);
  REQUIRE(p["layers"].size() == 4);
  CHECK(p["layers"][0]["name"] == "embedding");
  for (const auto& l : p["layers"]) {
    CHECK(l["fwd_ms"].get<double>() >= 0);
    CHECK(l["param_bytes"].get<std::int64_t>() > 0);
  }
}

TEST_CASE("profile: bad flags exit 2 and name the flag", "[cli]") {
  scratch_dir dir;
  CHECK(contains(run_cli({"profile", "--model", "gpt-tiny", "--microbatch", "0", "--out", dir / "p.json"}).err,
                 "--microbatch"));
  const cli_result missing = run_cli({"profile", "--model", "gpt-tiny", "--out", dir / "no/such/dir/p.json"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "--out"));
}

TEST_CASE("profile --recompute writes the mode and the stash that mode keeps", "[cli]") {
  // Bytes only: the times are live, so only their shape is checked.
  scratch_dir dir;
  std::map<std::string, json> by_mode;
  for (const char* mode : {"none", "selective", "full"}) {
    const std::string out = dir / (std::string(mode) + ".json");
    const cli_result r = run_cli({"profile", "--model", "gpt-tiny", "--microbatch", "2",
                                  "--repeats", "1", "--recompute", mode, "--out", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, std::string("recompute ") + mode));
    by_mode[mode] = json::parse(read_file(out));
    CHECK(by_mode[mode]["recompute"] == mode);
    REQUIRE(by_mode[mode]["layers"].size() == 4);
    for (const auto& l : by_mode[mode]["layers"]) CHECK(l["bwd_ms"].get<double>() >= 0);
  }
  const auto saved = [&](const char* mode, int l) {
    return by_mode[mode]["layers"][l]["saved_bytes"].get<std::int64_t>();
  };
  // Layers 1 and 2 are GPT blocks: selective keeps less; full keeps each block's whole stash.
  for (int l : {1, 2}) {
    CHECK(saved("selective", l) < saved("none", l));
    CHECK(saved("full", l) == saved("none", l));
  }
  CHECK(saved("selective", 0) == saved("none", 0));
}

TEST_CASE("profile --recompute refuses an unknown mode naming the flag", "[cli]") {
  scratch_dir dir;
  const cli_result r = run_cli({"profile", "--model", "gpt-tiny", "--recompute", "some", "--out",
                                dir / "p.json"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--recompute"));
}

TEST_CASE("profile --recompute all writes every mode's figures in one profile", "[cli]") {
  // The shape only: the times are live. The bytes are not: selective keeps less in the blocks.
  scratch_dir dir;
  const std::string out = dir / "all.json";
  const cli_result r = run_cli({"profile", "--model", "gpt-tiny", "--microbatch", "2",
                                "--repeats", "1", "--recompute", "all", "--out", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(read_file(out));
  CHECK(p["recompute"] == "none");
  REQUIRE(p["layers"].size() == 4);
  for (const auto& l : p["layers"]) {
    REQUIRE(l.contains("modes"));
    CHECK(l["modes"].size() == 2);
    for (const char* mode : {"selective", "full"}) {
      CHECK(l["modes"][mode]["bwd_ms"].get<double>() >= 0);
      CHECK(l["modes"][mode]["saved_bytes"].get<std::int64_t>() >= 0);
    }
  }
  for (int l : {1, 2}) {
    const auto& layer = p["layers"][l];
    CHECK(layer["modes"]["selective"]["saved_bytes"].get<std::int64_t>() <
          layer["saved_bytes"].get<std::int64_t>());
    CHECK(layer["modes"]["full"]["saved_bytes"] == layer["saved_bytes"]);
  }
  // It reads back as a profile of three modes.
  auto back = pipeworks::load_profile(out);
  REQUIRE(back.ok());
  CHECK(pipeworks::profile_modes(*back).size() == 3);
}
