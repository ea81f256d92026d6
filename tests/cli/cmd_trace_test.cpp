// `pipeworks trace html` (cli/cmd_trace.cpp): a simulated trace's page agrees with simulate
// --json; a file that is not a pipeworks trace, a truncated one or one of 1 GB exits 2 with its
// message and writes nothing.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "run_cli.hpp"
#include "runtime/explorer.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;
using nlohmann::json;

TEST_CASE("trace html of a simulated trace shows the simulator's stashes and bubble", "[cli][explorer]") {
  scratch_dir dir("trace_html");
  const std::string trace = dir / "t.json", page = dir / "t.html";
  const cli_result sim = run_cli({"simulate", "--schedule", "pipedream", "--stages", "4",
                                  "--microbatches", "8", "--json", "--trace", trace});
  REQUIRE(sim.exit_code == 0);
  const json expected = json::parse(sim.out);
  const cli_result r = run_cli({"trace", "html", trace, "--out", page});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto text = explorer_data_of(read_file(page));
  REQUIRE(text.ok());
  const json d = json::parse(*text);
  CHECK(d["source"] == "measured");
  CHECK(d["bubble_fraction"].get<double>() == Approx(expected["bubble_fraction"].get<double>()));
  REQUIRE(d["ranks"].size() == 4);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(d["ranks"][r]["peak_stashed"] == expected["stages"][r]["peak_inflight"]);
  }
}

TEST_CASE("trace html refuses a foreign, a truncated and a 1 GB trace with exit 2", "[cli][explorer]") {
  scratch_dir dir("trace_html_refused");
  const std::string page = dir / "out.html";
  const std::string good = dir / "good.json";
  REQUIRE(run_cli({"simulate", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2",
                   "--trace", good}).exit_code == 0);
  const std::string whole = read_file(good);
  write_file(dir / "cut.json", whole.substr(0, whole.size() - 40));
  write_file(dir / "other.json", R"({"traceEvents":[{"ph":"X","name":"x","pid":1,"tid":1,"ts":0,"dur":2}]})");
  const std::string big = dir / "big.json";
  write_file(big, "{");
  std::filesystem::resize_file(big, std::uintmax_t{1} << 30);  // sparse: no disk is used
  const std::vector<std::pair<std::string, std::string>> cases{
      {dir / "other.json", "is not a pipeworks trace"},
      {dir / "cut.json", "ends before its JSON does"},
      {big, "is 1073741824 bytes, more than the"},
      {dir / "missing.json", "cannot open the trace"}};
  for (const auto& [file, message] : cases) {
    INFO(file);
    const cli_result r = run_cli({"trace", "html", file, "--out", page});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("pipeworks trace: ") == 0);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(page));
  }
}

TEST_CASE("trace html --compare draws a second trace under compare", "[cli][explorer]") {
  scratch_dir dir("trace_html_compare");
  const std::string a = dir / "a.json", b = dir / "b.json", page = dir / "ab.html";
  REQUIRE(run_cli({"simulate", "--schedule", "1f1b", "--stages", "3", "--microbatches", "4",
                   "--trace", a}).exit_code == 0);
  REQUIRE(run_cli({"simulate", "--schedule", "1f1b", "--stages", "3", "--microbatches", "4",
                   "--fwd", "2", "--bwd", "4", "--trace", b}).exit_code == 0);
  const cli_result r = run_cli({"trace", "html", a, "--compare", b, "--out", page});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto text = explorer_data_of(read_file(page));
  REQUIRE(text.ok());
  const json d = json::parse(*text);
  REQUIRE(d.contains("compare"));
  CHECK(d["compare"]["makespan"].get<double>() == Approx(2 * d["makespan"].get<double>()));
  CHECK(d["compare"]["actions"].size() == d["actions"].size());
  write_file(dir / "cut.json", read_file(b).substr(0, 100));
  const cli_result cut = run_cli({"trace", "html", a, "--compare", dir / "cut.json", "--out", page});
  CHECK(cut.exit_code == 2);
  CHECK(cut.err.find("--compare: ") != std::string::npos);
  CHECK(cut.err.find("ends before its JSON does") != std::string::npos);
}
