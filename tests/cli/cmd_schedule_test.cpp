// End-to-end tests of `pipeworks schedule` (cli/cmd_schedule.cpp): the printed programs, CSV that
// parses back, and the messages for bad values and parameters a schedule does not permit.
#include <catch2/catch.hpp>

#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(line);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

// The "rank r: ..." lines of the text output, without the "rank r: " prefix.
std::vector<std::string> rank_programs(const std::string& out) {
  std::vector<std::string> programs;
  for (const auto& line : nonempty_lines(out)) {
    if (line.rfind("rank ", 0) != 0) continue;
    programs.push_back(line.substr(line.find(": ") + 2));
  }
  return programs;
}

}  // namespace

TEST_CASE("schedule 1f1b p=2 m=3 prints one warm-up forward on stage 0, then alternates", "[cli]") {
  const cli_result r =
      run_cli({"schedule", "--schedule", "1f1b", "--stages", "2", "--microbatches", "3"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> expected{
      "0F0 0F1 0B0 0F2 0B1 0B2 0STEP",
      "1F0 1B0 1F1 1B1 1F2 1B2 1STEP",
  };
  CHECK(rank_programs(r.out) == expected);
}

TEST_CASE("schedule gpipe p=2 m=2 prints all forwards, then all backwards", "[cli]") {
  const cli_result r =
      run_cli({"schedule", "--schedule", "gpipe", "--stages", "2", "--microbatches", "2"});
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> expected{"0F0 0F1 0B0 0B1 0STEP", "1F0 1F1 1B0 1B1 1STEP"};
  CHECK(rank_programs(r.out) == expected);
}

TEST_CASE("schedule --csv has one row per rank and the same actions as the text form", "[cli]") {
  for (int replicas : {1, 2}) {
    const std::vector<std::string> common{"schedule", "--schedule", "1f1b",
                                          "--stages", "3",          "--microbatches",
                                          "4",        "--replicas", std::to_string(replicas)};
    const cli_result text = run_cli(common);
    auto csv_args = common;
    csv_args.push_back("--csv");
    const cli_result csv = run_cli(csv_args);
    INFO("w=" << replicas << "\n" << csv.out << csv.err);
    REQUIRE(text.exit_code == 0);
    REQUIRE(csv.exit_code == 0);
    const auto rows = nonempty_lines(csv.out);
    CHECK(rows.size() == static_cast<std::size_t>(3 * replicas));
    const auto programs = rank_programs(text.out);
    REQUIRE(programs.size() == rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      INFO("rank " << r);
      CHECK(split(rows[r], ',') == split(programs[r], ' '));
    }
  }
}

TEST_CASE("schedule --csv --lowered adds SEND/RECV pairs and --pytorch leaves out STEP", "[cli]") {
  const cli_result lowered = run_cli({"schedule", "--schedule", "1f1b", "--stages", "2",
                                      "--microbatches", "2", "--csv", "--lowered"});
  REQUIRE(lowered.exit_code == 0);
  const auto rows = nonempty_lines(lowered.out);
  REQUIRE(rows.size() == 2);
  CHECK(contains(rows[0], "0SEND_F0"));
  CHECK(contains(rows[1], "1RECV_F0"));
  CHECK(contains(rows[1], "1SEND_B0"));
  CHECK(contains(rows[0], "0RECV_B0"));

  const cli_result pytorch = run_cli({"schedule", "--schedule", "1f1b", "--stages", "2",
                                      "--microbatches", "2", "--csv", "--pytorch"});
  REQUIRE(pytorch.exit_code == 0);
  CHECK(nonempty_lines(pytorch.out).size() == 2);
  CHECK_FALSE(contains(pytorch.out, "STEP"));
}

TEST_CASE("schedule: bad values exit 2 with a message naming the flag", "[cli]") {
  struct bad {
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<bad> cases{
      {{"--schedule", "1f1b", "--stages", "0", "--microbatches", "3"}, "--stages"},
      {{"--schedule", "1f1b", "--stages", "2", "--microbatches", "-1"}, "--microbatches"},
      {{"--schedule", "1f1b", "--stages", "two", "--microbatches", "3"}, "--stages"},
      {{"--schedule", "1f1b", "--stages", "2", "--microbatches", "3x"}, "--microbatches"},
      {{"--schedule", "interleaved", "--stages", "2", "--microbatches", "2", "--chunks", "0"},
       "--chunks"},
      {{"--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--replicas", "0"},
       "--replicas"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"schedule"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const cli_result r = run_cli(args);
    INFO(c.flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(contains(r.err, c.flag));
  }
}

TEST_CASE("schedule --schedule nope exits 2 and lists the valid names", "[cli]") {
  const cli_result r =
      run_cli({"schedule", "--schedule", "nope", "--stages", "2", "--microbatches", "2"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "nope"));
  for (const char* name : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "bfs", "pipedream",
                           "pipedream-vs", "2bw", "cyclic"}) {
    INFO(name);
    CHECK(contains(r.err, name));
  }
}

TEST_CASE("schedule: interleaved with m not a multiple of p says which m would work", "[cli]") {
  const cli_result r = run_cli({"schedule", "--schedule", "interleaved", "--stages", "4",
                                "--microbatches", "6", "--chunks", "2"});
  INFO(r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "multiple"));
  CHECK(contains(r.err, "m = 4"));
  CHECK(contains(r.err, "m = 8"));
}

TEST_CASE("schedule: 2bw with m < p says m >= p is needed", "[cli]") {
  const cli_result r =
      run_cli({"schedule", "--schedule", "2bw", "--stages", "4", "--microbatches", "2"});
  INFO(r.err);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "2bw"));
  CHECK(contains(r.err, "m >= 4"));
}

TEST_CASE("schedule --pytorch implies --csv", "[cli]") {
  const cli_result r = run_cli(
      {"schedule", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--pytorch"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(nonempty_lines(r.out) == std::vector<std::string>{"0F0,0F1,0B0,0B1", "1F0,1B0,1F1,1B1"});
}

TEST_CASE("schedule --pytorch prints one pipeline for one step in either PyTorch format", "[cli]") {
  const std::vector<std::string> base{"schedule", "--schedule", "gpipe", "--stages", "2",
                                      "--microbatches", "2", "--replicas", "2", "--steps", "3"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  // compute_only: p rows of F/B with ids 0..m-1, a note on stderr saying which of the 2 x 3.
  const cli_result only = with({"--pytorch", "--for-replica", "1", "--for-step", "2"});
  INFO(only.err);
  REQUIRE(only.exit_code == 0);
  CHECK(nonempty_lines(only.out) == std::vector<std::string>{"0F0,0F1,0B0,0B1", "1F0,1F1,1B0,1B1"});
  CHECK(contains(only.err, "wrote replica 1 of 2, step 2 of 3"));
  // compute_comms: SEND/RECV and a REDUCE_GRAD after each stage's m-th backward.
  const cli_result comms = with({"--pytorch", "--lowered"});
  REQUIRE(comms.exit_code == 0);
  CHECK(nonempty_lines(comms.out) ==
        std::vector<std::string>{"0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD",
                                 "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD"});
  // Out of range picks and schedules without a flush are usage errors naming the flag.
  const cli_result far = with({"--pytorch", "--for-step", "3"});
  CHECK(far.exit_code == 2);
  CHECK(contains(far.err, "--for-step"));
  CHECK(contains(far.err, "step 3 is not one of the schedule's 3 (0..2)"));
  CHECK(with({"--pytorch", "--for-replica", "2"}).exit_code == 2);
  const cli_result async = run_cli({"schedule", "--schedule", "pipedream", "--stages", "2",
                                    "--microbatches", "2", "--steps", "2", "--pytorch"});
  CHECK(async.exit_code == 2);
  CHECK(contains(async.err, "no flush between optimizer steps"));
  CHECK(contains(async.err, "--steps 1"));
  const cli_result one = run_cli({"schedule", "--schedule", "pipedream", "--stages", "2",
                                  "--microbatches", "2", "--pytorch"});
  CHECK(one.exit_code == 0);
  CHECK(one.err.empty());
}

TEST_CASE("schedule: a generator's error names every schedule flag", "[cli]") {
  const cli_result r = run_cli({"schedule", "--schedule", "2bw", "--stages", "4", "--microbatches",
                                "2", "--replicas", "2", "--steps", "3"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  for (const char* part : {"--schedule 2bw", "--stages 4", "--microbatches 2", "--chunks 1",
                           "--replicas 2", "--steps 3"}) {
    CHECK(contains(r.err, part));
  }
}

TEST_CASE("schedule: a request too large for memory is refused at once", "[cli]") {
  const cli_result r =
      run_cli({"schedule", "--schedule", "gpipe", "--stages", "1", "--microbatches", "1000000000"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "pipeworks schedule:"));
  CHECK(contains(r.err, "p * m can be at most about"));
}

TEST_CASE("schedule: too many steps for memory at p = m = 1 says what to lower instead of about 0",
          "[cli]") {
  for (const char* steps : {"1000000000", "2000000000"}) {
    const cli_result r = run_cli({"schedule", "--schedule", "1f1b", "--stages", "1",
                                  "--microbatches", "1", "--steps", steps});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "even p = m = 1 would not fit: v * w * steps (" + std::string(steps) +
                              ") can be at most about"));
    CHECK(contains(r.err, "lower the steps, replicas or chunks"));
    CHECK_FALSE(contains(r.err, "at most about 0 "));
  }
}
