// `pipeworks train/schedule/simulate --schedule zbv|v-half|v-min|dualpipev`: at the default flags
// each, as every flush schedule, ends with the weights of --schedule none bit for bit, takes its two chunks per device
// without --chunks, and refuses another chunk count by name (exit 2). dualpipe ends with the
// weights of 1F1B over twice the replicas, in one process and over a worker.
#include <catch2/catch.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

constexpr const char* v_kinds[] = {"zbv", "v-half", "v-min", "dualpipev"};

// Trains gpt-tiny 3 steps on dir/text.txt with `more` and returns the saved file's bytes.
std::string train_bytes(const scratch_dir& dir, std::vector<std::string> more,
                        const std::string& name) {
  const std::string file = dir / (name + ".safetensors");
  more.insert(more.end(), {"--save", file});
  const cli_result r = run_cli(gpt_tiny_train(dir / "text.txt", 3, more));
  INFO(name << ": " << r.err);
  REQUIRE(r.exit_code == 0);
  return read_file(file);
}

}  // namespace

TEST_CASE("train with every flush schedule ends with the bits of schedule none", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  auto train = [&](std::vector<std::string> more, const std::string& name) {
    more.insert(more.end(), {"--microbatches", "4"});
    return train_bytes(dir, std::move(more), name);
  };
  // The default --clip 1 is at work: the global norm, added in the order one device adds it.
  const std::string none = train({"--schedule", "none"}, "none");
  REQUIRE(!none.empty());
  for (const char* kind : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "bfs", "zbv", "v-half",
                           "v-min", "dualpipev"}) {
    INFO(kind);
    const std::string k = kind;
    std::vector<std::string> flags{"--schedule", kind, "--stages", "2"};
    if (k == "interleaved" || k == "bfs") flags.insert(flags.end(), {"--chunks", "2"});
    CHECK(train(flags, kind) == none);
  }
}

TEST_CASE("the V schedules take two chunks without --chunks and refuse another count", "[cli]") {
  for (const char* kind : v_kinds) {
    INFO(kind);
    const cli_result shown =
        run_cli({"schedule", "--schedule", kind, "--stages", "2", "--microbatches", "4"});
    CHECK(shown.exit_code == 0);
    CHECK(contains(shown.out, "v=2"));
    const cli_result simulated =
        run_cli({"simulate", "--schedule", kind, "--stages", "2", "--microbatches", "4"});
    CHECK(simulated.exit_code == 0);
    const cli_result refused = run_cli(
        {"schedule", "--schedule", kind, "--stages", "2", "--microbatches", "4", "--chunks", "3"});
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.err, "v must be 2"));
  }
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result r = run_cli(gpt_tiny_train(
      dir / "text.txt", 1, {"--schedule", "zbv", "--stages", "2", "--chunks", "1"}));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "v must be 2"));
}

TEST_CASE("train --auto-partition plans a V schedule with the V planner", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result r =
      run_cli(gpt_tiny_train(dir / "text.txt", 1, {"--schedule", "zbv", "--auto-partition"}));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "planner v"));
  CHECK(contains(r.out, "two stages each, a V"));
}

TEST_CASE("dualpipe runs in schedule and simulate and refuses an odd stage count", "[cli]") {
  const cli_result shown =
      run_cli({"schedule", "--schedule", "dualpipe", "--stages", "4", "--microbatches", "8"});
  REQUIRE(shown.exit_code == 0);
  CHECK(shown.out.find("# dualpipe: p=4 m=8 v=2") != std::string::npos);
  CHECK(shown.out.find("routes: stages 0..3 from device 0 and 4..7 from device 3, 4 microbatches "
                       "each") != std::string::npos);
  const cli_result sim =
      run_cli({"simulate", "--schedule", "dualpipe", "--stages", "4", "--microbatches", "8"});
  CHECK(sim.exit_code == 0);
  const cli_result odd =
      run_cli({"schedule", "--schedule", "dualpipe", "--stages", "3", "--microbatches", "6"});
  CHECK(odd.exit_code == 2);
  CHECK(odd.err.find("even stage count") != std::string::npos);
  // Its text reads back with its routes: the same simulation, and the same training.
  scratch_dir dir;
  write_file(dir / "dp.txt", shown.out);
  const cli_result from_file = run_cli({"simulate", "--schedule-file", dir / "dp.txt"});
  CHECK(from_file.exit_code == 0);
  // The same table under a title naming the file.
  CHECK(from_file.out.substr(from_file.out.find(" p=4 m=8 v=2")) ==
        sim.out.substr(sim.out.find(" p=4 m=8 v=2")));
  write_file(dir / "text.txt", small_text());
  const std::string from_text = train_bytes(dir, {"--schedule-file", dir / "dp.txt"}, "file");
  CHECK(from_text == train_bytes(dir, {"--schedule", "dualpipe", "--stages", "4",
                                       "--microbatches", "8"}, "built-in"));
  const cli_result csv = run_cli(
      {"schedule", "--schedule", "dualpipe", "--stages", "4", "--microbatches", "8", "--csv"});
  CHECK(csv.exit_code == 2);
  CHECK(csv.err.find("print the text form") != std::string::npos);
}

TEST_CASE("train dualpipe ends with the bits of 1F1B over twice the replicas, also over workers",
          "[cli][workers]") {
  // DualPipe is data parallelism over its two routes: each copy of a stage sums its route's
  // microbatches, and the copies' sum makes the next version, as two replicas' does.
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  auto train = [&](std::vector<std::string> more, const std::string& name) {
    more.insert(more.end(), {"--stages", "2"});
    return train_bytes(dir, std::move(more), name);
  };
  for (int w : {1, 2}) {
    INFO("w = " << w);
    const std::string ws = std::to_string(w), twice = std::to_string(2 * w);
    const std::string dual =
        train({"--schedule", "dualpipe", "--microbatches", "4", "--replicas", ws}, "dual" + ws);
    REQUIRE(!dual.empty());
    CHECK(dual == train({"--schedule", "1f1b", "--microbatches", "2", "--replicas", twice},
                        "dp" + ws));
  }
  // Over worker processes: the copies meet at a reducer in the driver's process with one replica,
  // and at the all-reduce shares of the 2w members beside their ranks with two.
  worker_cli a, b;
  CHECK(train({"--schedule", "dualpipe", "--microbatches", "4", "--workers", a.address()},
              "workers") == read_file(dir / "dual1.safetensors"));
  CHECK(train({"--schedule", "dualpipe", "--microbatches", "4", "--replicas", "2", "--workers",
               a.address() + "," + b.address()},
              "workers2") == read_file(dir / "dual2.safetensors"));
  // A checkpoint of step 2 resumes to the same bits (each rank file holds both of its copies).
  const std::string ckpt = dir / "ck";
  run_ok(gpt_tiny_train(dir / "text.txt", 3,
                        {"--schedule", "dualpipe", "--stages", "2", "--microbatches", "4",
                         "--save-every", "2", "--checkpoint-dir", ckpt}));
  REQUIRE(has_manifest(ckpt, 2));
  check_resumes_to(ckpt, dir / "dual1.safetensors");
  // Re-cut both ways between dualpipe and 1F1B over twice the replicas: the same run goes on.
  run_ok({"checkpoint", "reshard", ckpt, "--out", dir / "as-dp", "--schedule", "1f1b",
          "--stages", "2", "--replicas", "2", "--microbatches", "2"});
  check_resumes_to(dir / "as-dp", dir / "dual1.safetensors");
  const std::string dp_ckpt = dir / "dp-ck";
  run_ok(gpt_tiny_train(dir / "text.txt", 3,
                        {"--schedule", "1f1b", "--stages", "2", "--replicas", "2",
                         "--microbatches", "2", "--save-every", "2", "--checkpoint-dir", dp_ckpt}));
  run_ok({"checkpoint", "reshard", dp_ckpt, "--out", dir / "as-dual", "--schedule", "dualpipe",
          "--stages", "2", "--replicas", "1", "--microbatches", "4"});
  check_resumes_to(dir / "as-dual", dir / "dual1.safetensors");
  const cli_result zero = run_cli(gpt_tiny_train(
      dir / "text.txt", 1,
      {"--schedule", "dualpipe", "--stages", "2", "--microbatches", "4", "--replicas", "2",
       "--zero", "1"}));
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("does not shard dualpipe's stages") != std::string::npos);
  // --auto-partition plans it with the V planner (an even device count) and runs it.
  const cli_result planned = run_cli(gpt_tiny_train(
      dir / "text.txt", 1, {"--schedule", "dualpipe", "--microbatches", "4", "--auto-partition"}));
  INFO(planned.err);
  CHECK(planned.exit_code == 0);
  CHECK(planned.out.find("planner v") != std::string::npos);
  CHECK(planned.out.find("run: dualpipe, 2 devices (each stage on two, mirrored)") !=
        std::string::npos);
}
