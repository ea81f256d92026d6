// `pipeworks schedule ... --html FILE` (cli/cmd_schedule.cpp): the page's embedded JSON parses and
// agrees with `pipeworks simulate --json` for the same schedule; misuse exits 2.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "run_cli.hpp"
#include "runtime/explorer.hpp"
#include "runtime/schedule.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

// `schedule FLAGS --html page` and `simulate FLAGS --json`: the page's embedded data and the
// simulator's report of the same schedule.
std::pair<json, json> page_and_simulation(const std::vector<std::string>& flags,
                                          const std::string& page) {
  std::vector<std::string> args{"schedule"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--html", page});
  const cli_result made = run_cli(args);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  std::vector<std::string> sim_args{"simulate"};
  sim_args.insert(sim_args.end(), flags.begin(), flags.end());
  sim_args.push_back("--json");
  const cli_result simulated = run_cli(sim_args);
  REQUIRE(simulated.exit_code == 0);
  auto text = explorer_data_of(read_file(page));
  REQUIRE(text.ok());
  return {json::parse(*text), json::parse(simulated.out)};
}

}  // namespace

TEST_CASE("schedule --html embeds data that agrees with simulate --json for every schedule",
          "[cli][explorer]") {
  scratch_dir dir("schedule_html");
  for (schedule_kind kind : every_schedule_kind()) {
    const std::string name(schedule_name(kind));
    INFO(name);
    const std::string page = dir / (name + ".html");
    const auto [d, sim] = page_and_simulation(
        {"--schedule", name, "--stages", "4", "--microbatches", "8"}, page);
    CHECK(d["title"].get<std::string>().find(name) != std::string::npos);
    CHECK(d["bubble_fraction"].get<double>() == Approx(sim["bubble_fraction"].get<double>()).epsilon(1e-12));
    CHECK(d["makespan"].get<double>() == Approx(sim["makespan"].get<double>()).epsilon(1e-12));
    REQUIRE(d["ranks"].size() == sim["stages"].size());  // one replica: a rank per device
    for (std::size_t r = 0; r < d["ranks"].size(); ++r) {
      INFO("rank " << r);
      CHECK(d["ranks"][r]["peak_stashed"] == sim["stages"][r]["peak_inflight"]);
      CHECK(d["ranks"][r]["peak_live_versions"] == sim["stages"][r]["peak_versions"]);
    }
  }
}

TEST_CASE("schedule --html refuses --csv and a page over the action limit", "[cli][explorer]") {
  scratch_dir dir("schedule_html_refused");
  const std::string page = dir / "x.html";
  const cli_result csv = run_cli({"schedule", "--schedule", "1f1b", "--stages", "2",
                                  "--microbatches", "2", "--csv", "--html", page});
  CHECK(csv.exit_code == 2);
  CHECK(csv.err.find("--html: cannot go with --csv or --pytorch") != std::string::npos);
  const cli_result big = run_cli({"schedule", "--schedule", "1f1b", "--stages", "4",
                                  "--microbatches", "2048", "--html", page});
  CHECK(big.exit_code == 2);
  CHECK(big.err.find("more than one page shows") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(page));
}

TEST_CASE("docs/explorer.md commands run and write pages that hold the explorer's data",
          "[cli][explorer]") {
  // Each line of each ```sh block (indented ones too) is a pipeworks command, run in order in a
  // scratch folder (its .json and .html arguments put there); every page it names must hold
  // parseable data.
  const std::string doc = read_file(std::string(PIPEWORKS_SOURCE_DIR) + "/docs/explorer.md");
  scratch_dir dir("explorer_docs");
  int commands = 0, pages = 0;
  for (auto at = doc.find("```sh\n"); at != std::string::npos; at = doc.find("```sh\n", at + 1)) {
    const auto end = doc.find("```\n", at + 6);
    REQUIRE(end != std::string::npos);
    std::istringstream lines(doc.substr(at + 6, end - at - 6));
    for (std::string line; std::getline(lines, line);) {
      INFO(line);
      std::istringstream words(line);
      std::string word;
      if (!(words >> word)) continue;  // the indent before a closing fence inside a list
      REQUIRE(word == "pipeworks");
      std::vector<std::string> args;
      std::vector<std::string> written;
      while (words >> word) {
        const bool file = word.size() > 5 && (word.ends_with(".html") || word.ends_with(".json"));
        args.push_back(file ? dir / word : word);
        if (word.ends_with(".html")) written.push_back(dir / word);
      }
      const cli_result r = run_cli(args);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      ++commands;
      for (const std::string& page : written) {
        auto text = explorer_data_of(read_file(page));
        REQUIRE(text.ok());
        CHECK(json::parse(*text)["actions"].size() > 0);
        ++pages;
      }
    }
  }
  CHECK(commands >= 13);
  CHECK(pages >= 12);
}

TEST_CASE("schedule --html --costs holds the bytes the simulator counts", "[cli][explorer]") {
  scratch_dir dir("schedule_html_costs");
  const std::string costs = dir / "costs.json", page = dir / "2bw.html";
  write_file(costs, R"({"stages": [{"forward": 1, "backward": 2, "weight_grad": 1,
      "activation_bytes": 1000, "boundary_bytes": 100, "param_bytes": 50000}],
      "link": {"latency": 0.1, "bandwidth": 1e4}})");
  const std::vector<std::string> flags{"--schedule", "2bw", "--stages", "4", "--microbatches", "8",
                                       "--steps", "2", "--costs", costs};
  const auto [d, sim] = page_and_simulation(flags, page);
  CHECK(d["makespan"].get<double>() == Approx(sim["makespan"].get<double>()).epsilon(1e-12));
  for (std::size_t r = 0; r < d["ranks"].size(); ++r) {
    INFO("rank " << r);
    const json& x = d["ranks"][r];
    CHECK(x["simulated"]["peak_activation_bytes"] == sim["stages"][r]["peak_activation_bytes"]);
    CHECK(x["peak_bytes"] == x["simulated"]["peak_memory_bytes"]);
    CHECK(x["peak_bytes"].get<std::int64_t>() >= 2 * 50000);  // 2BW: two versions live
  }
  const cli_result alone = run_cli({"schedule", "--schedule", "1f1b", "--stages", "2",
                                    "--microbatches", "2", "--costs", costs});
  CHECK(alone.exit_code == 2);
  CHECK(alone.err.find("--costs") != std::string::npos);
}

TEST_CASE("schedule --html --compare puts the second schedule under compare as simulate gives it",
          "[cli][explorer]") {
  scratch_dir dir("schedule_html_compare");
  const std::string page = dir / "zb.html";
  const cli_result made = run_cli({"schedule", "--schedule", "zb-h1", "--stages", "4",
                                   "--microbatches", "8", "--compare", "zbv", "--html", page});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const cli_result simulated = run_cli({"simulate", "--schedule", "zbv", "--stages", "4",
                                        "--microbatches", "8", "--json"});
  REQUIRE(simulated.exit_code == 0);
  const json sim = json::parse(simulated.out);
  auto text = explorer_data_of(read_file(page));
  REQUIRE(text.ok());
  const json d = json::parse(*text);
  CHECK(d["title"].get<std::string>().find("zb-h1") != std::string::npos);
  REQUIRE(d.contains("compare"));
  const json& c = d["compare"];
  CHECK(c["title"].get<std::string>().find("zbv") != std::string::npos);
  CHECK(c["bubble_fraction"].get<double>() == Approx(sim["bubble_fraction"].get<double>()).epsilon(1e-12));
  REQUIRE(c["ranks"].size() == sim["stages"].size());
  for (std::size_t r = 0; r < c["ranks"].size(); ++r)
    CHECK(c["ranks"][r]["peak_stashed"] == sim["stages"][r]["peak_inflight"]);
  const cli_result unknown = run_cli({"schedule", "--schedule", "zb-h1", "--stages", "4",
                                      "--microbatches", "8", "--compare", "nope", "--html", page});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("--compare: unknown schedule 'nope'") != std::string::npos);
}
