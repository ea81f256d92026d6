// `pipeworks profile`: writes profile.json with one entry per layer, and names bad flags.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"

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
