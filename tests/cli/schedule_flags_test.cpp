// `pipeworks schedule` and `simulate` with --schedule-file (cli/schedule_flags.cpp): PyTorch CSV
// in both forms and pipeworks' action text read back to the generator's programs, and files that
// deadlock or run a backward before its forward refused with exit 2 naming the actions.
#include <catch2/catch.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

// The "rank r: ..." lines of `pipeworks schedule`'s text output.
std::vector<std::string> rank_lines(const std::string& out) {
  std::vector<std::string> lines;
  for (const auto& line : nonempty_lines(out))
    if (line.rfind("rank ", 0) == 0) lines.push_back(line);
  return lines;
}

cli_result run_ok_out(const std::vector<std::string>& args) {
  const cli_result r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("schedule --pytorch then --schedule-file gives the generator's programs", "[cli]") {
  scratch_dir dir;
  const std::string csv = dir / "schedule.csv";
  // Every flush kind is read back in tests/runtime/schedule_file_test.cpp; here one of each shape.
  for (const std::string kind : {"1f1b", "interleaved", "zb-h2", "zbv"})
    for (const bool lowered : {false, true}) {
      // Two chunks for interleaved, BFS and the V schedules (device d holds d and 2p-1-d).
      const bool two = kind == "interleaved" || kind == "bfs" || kind == "zbv" || kind[0] == 'v';
      const std::vector<std::string> shape{"--schedule", kind, "--stages", "2", "--microbatches",
                                           "4", "--chunks", two ? "2" : "1"};
      std::vector<std::string> pytorch{"schedule"};
      pytorch.insert(pytorch.end(), shape.begin(), shape.end());
      pytorch.push_back("--pytorch");
      if (lowered) pytorch.push_back("--lowered");
      write_file(csv, run_ok_out(pytorch).out);
      std::vector<std::string> generated{"schedule", "--replicas", "2", "--steps", "2"};
      generated.insert(generated.end(), shape.begin(), shape.end());
      std::vector<std::string> from_file{"schedule", "--schedule-file", csv, "--replicas", "2",
                                         "--steps", "2"};
      if (lowered) {
        generated.push_back("--lowered");
        from_file.push_back("--lowered");
      }
      INFO(kind << (lowered ? " lowered" : ""));
      CHECK(rank_lines(run_ok_out(from_file).out) == rank_lines(run_ok_out(generated).out));
    }
}

TEST_CASE("schedule's text output read back with --schedule-file gives the same programs", "[cli]") {
  scratch_dir dir;
  const std::string text = dir / "programs.txt";
  const cli_result gen = run_ok_out({"schedule", "--schedule", "pipedream", "--stages", "3",
                                     "--microbatches", "4", "--steps", "2"});
  write_file(text, gen.out);
  const cli_result back = run_ok_out({"schedule", "--schedule-file", text});
  CHECK(rank_lines(back.out) == rank_lines(gen.out));
  CHECK_THAT(back.out, Catch::Contains("# versions: latest (schedule file)"));
  // PipeDream runs F of step 1 before STEP 0: not a synchronous schedule.
  const cli_result sync = run_cli({"schedule", "--schedule-file", text, "--schedule-versions", "sync"});
  CHECK(sync.exit_code == 2);
  CHECK_THAT(sync.err, Catch::Contains("uses version 1 (version table), but only 0 STEPs"));
}

TEST_CASE("a schedule file that deadlocks is refused naming the stuck actions, exit 2", "[cli]") {
  scratch_dir dir;
  const std::string csv = dir / "deadlock.csv";
  // Rank 1 waits for microbatch 1's forward, which rank 0 runs only after microbatch 0's backward.
  write_file(csv, "0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n");
  for (const char* command : {"schedule", "simulate"}) {
    const cli_result r = run_cli({command, "--schedule-file", csv});
    INFO(command << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("deadlock.csv (PyTorch CSV (compute_only)) is not a valid "
                                      "schedule: deadlock"));
    CHECK_THAT(r.err, Catch::Contains("<-- stuck"));
  }
  const cli_result text = run_cli({"schedule", "--schedule-file", csv});
  CHECK_THAT(text.err, Catch::Contains("[1F1]"));
  CHECK_THAT(text.err, Catch::Contains("[0B0]"));
  CHECK_THAT(text.err, Catch::Contains("rank 1 waits at 1F1 for 0F1 on rank 0"));
}

TEST_CASE("a schedule file with a backward before its forward is refused naming it, exit 2",
          "[cli]") {
  scratch_dir dir;
  const std::string csv = dir / "backward_first.csv";
  write_file(csv, "0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n");
  for (const char* command : {"schedule", "simulate"}) {
    const cli_result r = run_cli({command, "--schedule-file", csv});
    INFO(command << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("1B0 (rank 1, action 0): a B before its F; 1F0 must come "
                                      "earlier on rank 1"));
  }
}

TEST_CASE("simulate --schedule-file simulates the file as the built-in schedule", "[cli]") {
  scratch_dir dir;
  const std::string csv = dir / "zb.csv";
  write_file(csv, run_ok_out({"schedule", "--schedule", "zb-h1", "--stages", "4",
                              "--microbatches", "8", "--pytorch"})
                      .out);
  const auto builtin = nlohmann::json::parse(run_ok_out(simulate_args("zb-h1", 4, 8, {"--json"})).out);
  const auto file = nlohmann::json::parse(
      run_ok_out({"simulate", "--schedule-file", csv, "--json"}).out);
  CHECK(file["makespan"] == builtin["makespan"]);
  CHECK(file["bubble_fraction"] == builtin["bubble_fraction"]);
}

TEST_CASE("schedule --schedule-file refuses flags that disagree with the file and --schedule", "[cli]") {
  scratch_dir dir;
  const std::string csv = dir / "gpipe.csv";
  write_file(csv, "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
  const cli_result stages = run_cli({"schedule", "--schedule-file", csv, "--stages", "3"});
  CHECK(stages.exit_code == 2);
  CHECK_THAT(stages.err, Catch::Contains("--stages: 3, but " + csv + " has 2 devices"));
  const cli_result both = run_cli({"schedule", "--schedule-file", csv, "--schedule", "1f1b"});
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Catch::Contains("and --schedule both name a schedule"));
  const cli_result neither = run_cli({"schedule", "--stages", "2", "--microbatches", "2"});
  CHECK(neither.exit_code == 2);
  CHECK_THAT(neither.err, Catch::Contains("--schedule: is required (or --schedule-file)"));
  const cli_result missing = run_cli({"simulate", "--schedule-file", dir / "absent.csv"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("absent.csv"));
}

TEST_CASE("a compute_comms file with a receive that no send matches is refused, exit 2", "[cli]") {
  scratch_dir dir;
  const std::string csv = dir / "unmatched.csv";
  write_file(csv, "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0\n");
  const cli_result r = run_cli({"schedule", "--schedule-file", csv});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("(PyTorch CSV (compute_comms)) is not a valid schedule: "
                                    "unmatched receive: 0RECV_B0 on rank 0 waits for 1SEND_B0"));
}
