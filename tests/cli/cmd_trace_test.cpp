// `pipeworks trace html` (cli/cmd_trace.cpp): a simulated trace's page agrees with simulate
// --json; a real run's page shows the bytes train measured; a file that is not a pipeworks trace,
// a truncated one, one of 1 GB or a bad window of steps exits 2 with its message and writes
// nothing.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "worker_cli.hpp"
#include "runtime/explorer.hpp"
#include "tests/explorer_states.hpp"

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

// A real run (train --trace) records each F's stashed bytes and each STEP's new version's: the
// page's stashed bytes at each moment are the sum of its stashed microbatches' recorded bytes,
// their peak per rank is the peak_activation_bytes train measured for that stage, and the bytes
// held add each live version at its stage's recorded size.
TEST_CASE("trace html of a real run shows the bytes train measured, for 1f1b, pipedream and 2bw",
          "[cli][explorer]") {
  for (const std::string kind : {"1f1b", "pipedream", "2bw"}) {
    INFO(kind);
    scratch_dir dir("trace_html_real");
    const std::string trace = dir / "run.json", page = dir / "run.html";
    const cli_result run = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                    "--steps", "4", "--batch", "32", "--microbatches", "4",
                                    "--optimizer", "sgd", "--lr", "0.05", "--schedule", kind,
                                    "--stages", "3", "--json", "--trace", trace});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const json summary = json_lines(run).back();
    const cli_result r = run_cli({"trace", "html", trace, "--out", page});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json d = json::parse(*explorer_data_of(read_file(page)));
    CHECK(d["bytes"] == "as the run recorded them");

    // The bytes the trace recorded: each F's stash, each stage's version (its STEPs').
    std::map<std::tuple<int, int, int>, std::int64_t> stashed_bytes;  // (rank, stage, mb)
    std::map<int, std::int64_t> version_bytes;                         // stage -> bytes
    const json recorded = json::parse(read_file(trace));
    for (const json& e : recorded["traceEvents"]) {
      if (e["ph"] != "X") continue;
      const json& args = e["args"];
      const int stage = args["stage"];
      if (args["kind"] == "F") {
        REQUIRE(args.contains("bytes"));
        stashed_bytes[{e["pid"].get<int>(), stage, args["microbatch"].get<int>()}] = args["bytes"];
      }
      if (args["kind"] == "STEP") {
        REQUIRE(args.contains("bytes"));
        CHECK(args["bytes"].get<std::int64_t>() > 0);
        if (version_bytes.count(stage)) CHECK(version_bytes[stage] == args["bytes"]);
        version_bytes[stage] = args["bytes"];
      }
    }
    REQUIRE(version_bytes.size() == 3);

    const json states = pipeworks::test::full_states(d);
    REQUIRE(d["ranks"].size() == 3);
    for (int rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      std::int64_t peak = 0;
      for (const json& st : states) {
        const json& x = st["ranks"][rank];
        std::int64_t sum = 0;
        for (const json& held : x["stashed"])
          sum += stashed_bytes.at({rank, held["stage"].get<int>(), held["microbatch"].get<int>()});
        std::int64_t versions = 0;
        for (const auto& [stage, live] : x["versions"].items())
          versions += version_bytes.at(std::stoi(stage)) * static_cast<std::int64_t>(live.size());
        INFO("at t = " << st["time"]);
        CHECK(x["stash_bytes"].get<std::int64_t>() == sum);
        CHECK(x["bytes"].get<std::int64_t>() == sum + versions);
        peak = std::max(peak, sum);
      }
      const json& stage = summary["stages"][rank];
      REQUIRE(stage["stage"] == rank);
      CHECK(stage["peak_activation_bytes"].get<std::int64_t>() > 0);
      CHECK(peak == stage["peak_activation_bytes"].get<std::int64_t>());
      CHECK(d["ranks"][rank]["peak_stash_bytes"] == stage["peak_activation_bytes"]);
    }
  }
}

// Where a stash changes size after its F (a zero-bubble I leaves only what its W needs; under
// --recompute full a backward holds the stash made again), the B, I and W record it too, and the
// page's peak stashed bytes per rank are still the ones train measured.
TEST_CASE("trace html of a real run with zero bubble or recompute peaks at train's stashed bytes",
          "[cli][explorer]") {
  const std::vector<std::vector<std::string>> runs{{"--schedule", "zb-h1"},
                                                   {"--schedule", "zb-h2"},
                                                   {"--schedule", "1f1b", "--recompute", "full"}};
  for (const auto& flags : runs) {
    INFO(flags[1] << (flags.size() > 2 ? " --recompute full" : ""));
    scratch_dir dir("trace_html_real_resized");
    const std::string trace = dir / "run.json", page = dir / "run.html";
    std::vector<std::string> args{"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                  "--steps", "3", "--batch", "32", "--microbatches", "4",
                                  "--optimizer", "sgd", "--lr", "0.05", "--stages", "3",
                                  "--json", "--trace", trace};
    args.insert(args.end(), flags.begin(), flags.end());
    const cli_result run = run_cli(args);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const json summary = json_lines(run).back();
    REQUIRE(run_cli({"trace", "html", trace, "--out", page}).exit_code == 0);
    const json d = json::parse(*explorer_data_of(read_file(page)));
    CHECK(d["bytes"] == "as the run recorded them");
    REQUIRE(d["ranks"].size() == 3);
    for (int rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      REQUIRE(summary["stages"][rank]["stage"] == rank);
      CHECK(summary["stages"][rank]["peak_activation_bytes"].get<std::int64_t>() > 0);
      CHECK(d["ranks"][rank]["peak_stash_bytes"] == summary["stages"][rank]["peak_activation_bytes"]);
    }
  }
}

// A trace without bytes (written before runs recorded them, or simulated) still reads, and its
// page says the bytes are unknown rather than showing zeros.
TEST_CASE("trace html of a trace without bytes says they are unknown", "[cli][explorer]") {
  scratch_dir dir("trace_html_no_bytes");
  const std::string trace = dir / "t.json", page = dir / "t.html";
  REQUIRE(run_cli({"simulate", "--schedule", "1f1b", "--stages", "2", "--microbatches", "3",
                   "--trace", trace}).exit_code == 0);
  REQUIRE(read_file(trace).find("\"bytes\"") == std::string::npos);
  const cli_result r = run_cli({"trace", "html", trace, "--out", page});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json d = json::parse(*explorer_data_of(read_file(page)));
  CHECK(d["bytes"] == "unknown: the trace records no sizes");
  for (const json& x : d["ranks"]) {
    CHECK(x["peak_bytes"].is_null());
    CHECK(x["peak_stash_bytes"].is_null());
  }
  for (const json& st : pipeworks::test::full_states(d))
    for (const json& x : st["ranks"]) {
      CHECK(x["bytes"].is_null());
      CHECK(x["stash_bytes"].is_null());
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

// A run over worker processes sends its events to the driver's tracer with their bytes, and every
// real trace names the schedule's version rule, which the page shows with each action's version.
TEST_CASE("trace html of a run over workers shows its bytes and the schedule's version rule",
          "[cli][explorer][workers]") {
  scratch_dir dir("trace_html_workers");
  worker_cli a, b;
  const std::string trace = dir / "run.json", page = dir / "run.html";
  const cli_result run = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                  "--steps", "3", "--batch", "32", "--microbatches", "4",
                                  "--schedule", "2bw", "--stages", "2", "--json", "--trace", trace,
                                  "--workers", a.address() + "," + b.address()});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const json summary = json_lines(run).back();
  const json recorded = json::parse(read_file(trace));
  const std::string rule = recorded["otherData"]["version_rule"];
  CHECK(contains(rule, "t-1"));  // 2BW's: max(t-1, 0)
  const cli_result r = run_cli({"trace", "html", trace, "--out", page});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json d = json::parse(*explorer_data_of(read_file(page)));
  CHECK(d["bytes"] == "as the run recorded them");
  CHECK(d["version_rule"] == rule);
  for (int rank = 0; rank < 2; ++rank)
    CHECK(d["ranks"][rank]["peak_stash_bytes"] == summary["stages"][rank]["peak_activation_bytes"]);
  int forwards = 0;
  for (const json& action : d["actions"])
    if (action["kind"] == "F") {
      ++forwards;
      CHECK(contains(action["rule"].get<std::string>(), "by the rule: " + rule));
    }
  CHECK(forwards == 2 * 3 * 4);
}
