// `pipeworks train --schedule-file` (cli/train_plan.cpp): the PyTorch CSV of every built-in flush
// schedule, in both forms, and pipeworks' action text train to the weights of --schedule KIND bit
// for bit; the plan carries the programs, so --plan trains without the file; files that deadlock
// or do not fit exit 2 naming the problem.
#include <catch2/catch.hpp>

#include <filesystem>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

std::vector<std::string> tiny(const scratch_dir& dir, std::vector<std::string> more) {
  return gpt_tiny_train(dir / "text.txt", 2, std::move(more));
}

// Trains and returns the saved weights' bytes.
std::string weights(const scratch_dir& dir, const std::string& name,
                    std::vector<std::string> more) {
  const std::string file = dir / (name + ".safetensors");
  more.insert(more.end(), {"--save", file});
  const cli_result r = run_cli(tiny(dir, more));
  INFO(name << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  return read_file(file);
}

// The chunks a kind takes in these tests: two for interleaved, BFS and the V schedules.
std::string chunks_of(const std::string& kind) {
  const bool two = kind == "interleaved" || kind == "bfs" || kind[0] == 'v' || kind == "zbv" ||
                   kind == "dualpipev";
  return two ? "2" : "1";
}

void check_kinds_in_form(bool lowered) {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const std::string kind :
       {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "bfs", "zbv", "v-half", "v-min",
        "dualpipev"}) {
    const std::vector<std::string> shape{"--schedule", kind, "--stages", "2", "--microbatches",
                                         "4", "--chunks", chunks_of(kind)};
    std::vector<std::string> print{"schedule", "--pytorch"};
    print.insert(print.end(), shape.begin(), shape.end());
    if (lowered) print.push_back("--lowered");
    const cli_result csv = run_cli(print);
    REQUIRE(csv.exit_code == 0);
    const std::string file = dir / (kind + ".csv");
    write_file(file, csv.out);
    INFO(kind << (lowered ? " compute_comms" : " compute_only"));
    const std::string builtin = weights(dir, kind, shape);
    REQUIRE_FALSE(builtin.empty());
    CHECK(weights(dir, kind + "-file", {"--schedule-file", file}) == builtin);
  }
}

}  // namespace

TEST_CASE("train with a compute_only CSV gives the bits of train --schedule KIND", "[cli]") {
  check_kinds_in_form(false);
}

TEST_CASE("train with a compute_comms CSV gives the bits of train --schedule KIND", "[cli]") {
  check_kinds_in_form(true);
}

TEST_CASE("train with a PyTorch CSV copies its pipeline to every replica", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result csv = run_cli({"schedule", "--schedule", "zb-h1", "--stages", "2",
                                  "--microbatches", "2", "--pytorch"});
  REQUIRE(csv.exit_code == 0);
  const std::string file = dir / "zb.csv";
  write_file(file, csv.out);
  CHECK(weights(dir, "file", {"--schedule-file", file, "--replicas", "2"}) ==
        weights(dir, "zb-h1", {"--schedule", "zb-h1", "--stages", "2", "--microbatches", "2",
                               "--replicas", "2"}));
}

TEST_CASE("train with pipeworks' action text and from its plan gives the bits of the kind",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result text = run_cli({"schedule", "--schedule", "1f1b", "--stages", "2",
                                   "--microbatches", "2"});
  REQUIRE(text.exit_code == 0);
  const std::string file = dir / "programs.txt";
  write_file(file, text.out);
  const std::string builtin =
      weights(dir, "1f1b", {"--schedule", "1f1b", "--stages", "2", "--microbatches", "2"});
  // The text names its rule ("# versions: synchronous ..."): sync, which clips globally as 1F1B
  // does. latest (the default for text with STEPs and no such line) clips each stage on its own,
  // as PipeDream does; without clipping the two agree.
  CHECK(weights(dir, "text", {"--schedule-file", file}) == builtin);
  CHECK(weights(dir, "latest", {"--schedule-file", file, "--schedule-versions", "latest",
                                "--clip", "0"}) ==
        weights(dir, "1f1b-noclip",
                {"--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--clip", "0"}));
  // The plan carries the programs: it trains with the file gone.
  const std::string plan = dir / "plan.json";
  const cli_result printed = run_cli(tiny(dir, {"--schedule-file", file, "--print-plan", plan}));
  INFO(printed.err);
  REQUIRE(printed.exit_code == 0);
  CHECK_THAT(read_file(plan), Catch::Contains("\"programs\""));
  std::filesystem::remove(file);
  const std::string saved = dir / "plan.safetensors";
  const cli_result r = run_cli({"train", "--plan", plan, "--save", saved, "--sample", "0"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(saved) == builtin);
}

TEST_CASE("train refuses a schedule file that deadlocks or does not fit, exit 2", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string csv = dir / "deadlock.csv";
  write_file(csv, "0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n");
  const cli_result r = run_cli(tiny(dir, {"--schedule-file", csv}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--schedule-file " + csv + ": do not make a valid schedule: deadlock"));
  CHECK_THAT(r.err, Catch::Contains("<-- stuck"));
  const std::string backward_first = dir / "backward_first.csv";
  write_file(backward_first, "0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n");
  const cli_result b = run_cli(tiny(dir, {"--schedule-file", backward_first}));
  CHECK(b.exit_code == 2);
  CHECK_THAT(b.err, Catch::Contains("a B before its F"));
  const std::string ok = dir / "gpipe.csv";
  write_file(ok, "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
  const cli_result m = run_cli(tiny(dir, {"--schedule-file", ok, "--microbatches", "4"}));
  CHECK(m.exit_code == 2);
  CHECK_THAT(m.err, Catch::Contains("--microbatches: is 4, but --schedule-file " + ok + " has 2"));
}

TEST_CASE("a run from a V-shaped schedule file resumes bit for bit without the file", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  // Device 0 holds virtual stages 0 and 3, device 1 holds 1 and 2.
  const std::string csv = dir / "v.csv";
  write_file(csv, "0F0,0F1,3F0,3B0,3F1,3B1,0B0,0B1\n1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n");
  auto run = [&](int steps, std::vector<std::string> more) {
    return run_cli(gpt_tiny_train(dir / "text.txt", steps, std::move(more)));
  };
  const std::string whole = dir / "whole.safetensors";
  const cli_result w = run(4, {"--schedule-file", csv, "--save", whole});
  INFO(w.err);
  REQUIRE(w.exit_code == 0);
  const std::string ckpt = dir / "ckpt";
  const cli_result c = run(4, {"--schedule-file", csv, "--save-every", "3", "--checkpoint-dir", ckpt});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  REQUIRE(has_manifest(ckpt, 3));
  // Another file is another schedule: a resume refuses it, naming the flag.
  const std::string other = dir / "other.csv";
  write_file(other, "0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n");
  const cli_result refused = run_cli({"train", "--resume", ckpt, "--schedule-file", other,
                                      "--sample", "0"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--schedule-file"));
  std::filesystem::remove(csv);
  const std::string resumed = dir / "resumed.safetensors";
  const cli_result r = run_cli({"train", "--resume", ckpt, "--save", resumed, "--sample", "0"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(resumed) == read_file(whole));
}

TEST_CASE("train --schedule-file --compare-sim simulates the file's programs", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string csv = dir / "gpipe.csv";
  write_file(csv, "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
  const std::string trace = dir / "run.json";
  const cli_result r = run_cli(tiny(dir, {"--schedule-file", csv, "--trace", trace, "--compare-sim"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("compare-sim: measured makespan"));
}

TEST_CASE("worker processes run a schedule file's programs from the plan alone", "[cli][workers]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string csv = dir / "v.csv";  // V-shaped: device 0 holds stages 0 and 3
  write_file(csv, "0F0,0F1,3F0,3B0,3F1,3B1,0B0,0B1\n1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n");
  const std::string local = weights(dir, "local", {"--schedule-file", csv});
  worker_cli w1, w2;  // each hosts one device's ranks; neither reads the file
  CHECK(weights(dir, "remote", {"--schedule-file", csv, "--workers",
                                w1.address() + "," + w2.address()}) == local);
  CHECK(contains(w1.process().errors_so_far(), "hosting ranks"));
  CHECK(contains(w2.process().errors_so_far(), "hosting ranks"));
}

TEST_CASE("train with PipeDream's action text gives PipeDream's bits under the latest rule",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  // An asynchronous schedule is no one-step pipeline: the text holds both steps of the run.
  const cli_result text = run_cli({"schedule", "--schedule", "pipedream", "--stages", "2",
                                   "--microbatches", "2", "--steps", "2", "--replicas", "2"});
  REQUIRE(text.exit_code == 0);
  const std::string file = dir / "pipedream.txt";
  write_file(file, text.out);
  CHECK(weights(dir, "text", {"--schedule-file", file, "--replicas", "2"}) ==
        weights(dir, "pipedream", {"--schedule", "pipedream", "--stages", "2", "--microbatches",
                                   "2", "--replicas", "2"}));
}
