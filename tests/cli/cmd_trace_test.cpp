// `pipeworks trace html` (cli/cmd_trace.cpp): a simulated trace's page agrees with simulate
// --json; a file that is not a pipeworks trace, a truncated one, one of 1 GB or a bad window of
// steps exits 2 with its message and writes nothing.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

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

TEST_CASE("trace html --from-step --to-step writes a window and refuses bad ones naming the flag",
          "[cli][explorer]") {
  scratch_dir dir("trace_html_window");
  const std::string trace = dir / "pd.json", page = dir / "w.html";
  REQUIRE(run_cli({"simulate", "--schedule", "pipedream", "--stages", "4", "--microbatches", "4",
                   "--steps", "5", "--trace", trace}).exit_code == 0);
  const cli_result r = run_cli({"trace", "html", trace, "--out", page, "--from-step", "2",
                                "--to-step", "3", "--compare", trace});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto text = explorer_data_of(read_file(page));
  REQUIRE(text.ok());
  const json d = json::parse(*text);
  CHECK(d["window"]["from_step"] == 2);
  CHECK(d["window"]["to_step"] == 3);
  CHECK(d["compare"]["window"] == d["window"]);  // the compared trace gets the same window
  CHECK(d["note"].get<std::string>().find("steps 2 to 3 of 5") == 0);
  const cli_result open_end = run_cli({"trace", "html", trace, "--out", page, "--from-step", "4"});
  REQUIRE(open_end.exit_code == 0);
  CHECK(json::parse(*explorer_data_of(read_file(page)))["window"]["to_step"] == 5);
  std::filesystem::remove(page);

  const std::string short_trace = dir / "short.json";
  REQUIRE(run_cli({"simulate", "--schedule", "pipedream", "--stages", "4", "--microbatches", "4",
                   "--steps", "2", "--trace", short_trace}).exit_code == 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad{
      {{"--from-step", "0"}, "--from-step: steps count from 1, got 0"},
      {{"--to-step", "-1"}, "--to-step: steps count from 1, got -1"},
      {{"--from-step", "3", "--to-step", "2"},
       "--to-step: step 2 is before the window's first step, 3: the window would be empty"},
      {{"--from-step", "6"}, "--from-step: step 6 is past the trace's last step, 5"},
      {{"--from-step", "2", "--to-step", "9"}, "--to-step: step 9 is past the trace's last step, 5"},
      {{"--from-step", "3", "--compare", short_trace},
       "--from-step: step 3 is past the trace's last step, 2 (in the --compare trace)"}};
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> args{"trace", "html", trace, "--out", page};
    args.insert(args.end(), flags.begin(), flags.end());
    const cli_result no = run_cli(args);
    INFO(no.err);
    CHECK(no.exit_code == 2);
    CHECK(no.err.find("pipeworks trace: " + message) == 0);
    CHECK_FALSE(std::filesystem::exists(page));
  }
}
