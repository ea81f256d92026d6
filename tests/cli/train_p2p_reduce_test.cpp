// `pipeworks train --schedule cyclic --reduce p2p`: cyclic's point-to-point reduce ends with the
// collective reduce's weights, losses and gradient norms, bit for bit, in one process and over
// worker processes; a checkpoint resumes bit for bit; misuse exits 2 naming the flag.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> cyclic_args(const scratch_dir& dir, int replicas, const char* m,
                                     std::vector<std::string> more) {
  std::vector<std::string> all{"--eval-windows", "2", "--json", "--schedule", "cyclic",
                               "--stages", "2", "--replicas", std::to_string(replicas),
                               "--microbatches", m};
  all.insert(all.end(), more.begin(), more.end());
  return gpt_tiny_train(dir / "text.txt", 4, std::move(all));
}

// The step lines' losses and gradient norms.
std::vector<std::pair<double, double>> step_figures(const cli_result& r) {
  std::vector<std::pair<double, double>> out;
  for (const json& j : json_lines(r))
    if (j.contains("step") && j.contains("grad_norm"))
      out.emplace_back(j["loss"].get<double>(), j["grad_norm"].get<double>());
  return out;
}

}  // namespace

TEST_CASE("train --reduce p2p ends with the bits, losses and norms of the collective reduce", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (auto [w, m] : {std::pair{2, "4"}, std::pair{4, "2"}}) {
    INFO("w = " << w);
    std::vector<std::string> files;
    std::vector<cli_result> runs;
    for (const char* reduce : {"collective", "p2p"}) {
      const std::string file = dir / (std::string(reduce) + std::to_string(w) + ".safetensors");
      runs.push_back(run_cli(cyclic_args(dir, w, m, {"--reduce", reduce, "--save", file})));
      INFO(runs.back().err);
      REQUIRE(runs.back().exit_code == 0);
      files.push_back(read_file(file));
    }
    REQUIRE(!files[0].empty());
    CHECK(files[0] == files[1]);
    const auto collective = step_figures(runs[0]), p2p = step_figures(runs[1]);
    CHECK(collective.size() == 4);
    CHECK(collective == p2p);
    CHECK(last_json(runs[0])["final_loss"] == last_json(runs[1])["final_loss"]);
    // Both report the stage's fullest rank: under p2p the last replica, which holds every moment.
    for (std::size_t s = 0; s < 2; ++s)
      CHECK(last_json(runs[1])["stages"][s]["optimizer_bytes"] ==
            last_json(runs[0])["stages"][s]["optimizer_bytes"]);
  }
}

TEST_CASE("a --reduce p2p checkpoint resumes bit for bit and keeps its reduce", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string whole = dir / "whole.safetensors";
  run_ok(cyclic_args(dir, 2, "4", {"--reduce", "p2p", "--save", whole}));
  const std::string ckpt = dir / "ck";
  run_ok(cyclic_args(dir, 2, "4", {"--reduce", "p2p", "--save-every", "2", "--checkpoint-dir", ckpt}));
  REQUIRE(has_manifest(ckpt, 2));
  check_resumes_to(ckpt, whole);
  // The rank files hold the moments where the reduce put them: another reduce is refused.
  const cli_result other = run_cli({"train", "--resume", ckpt, "--reduce", "collective", "--sample", "0"});
  INFO(other.err);
  CHECK(other.exit_code == 2);
  CHECK(contains(other.err, "--reduce"));
}

TEST_CASE("train --reduce p2p over two worker processes ends with the bits of one process",
          "[cli][workers]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  worker_cli a, b;
  for (auto [w, m] : {std::pair{2, "4"}, std::pair{4, "2"}}) {
    INFO("w = " << w);
    const std::string local = dir / ("local" + std::to_string(w) + ".safetensors");
    run_ok(cyclic_args(dir, w, m, {"--save", local}));
    const std::string file = dir / ("workers" + std::to_string(w) + ".safetensors");
    const cli_result r = run_cli(cyclic_args(dir, w, m, {"--reduce", "p2p", "--workers",
                                                         a.address() + "," + b.address(),
                                                         "--save", file}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_file(file) == read_file(local));
  }
}

TEST_CASE("train --reduce p2p outside cyclic or with --zero exits 2 naming it", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result flush = run_cli(gpt_tiny_train(dir / "text.txt", 2, {"--schedule", "1f1b",
      "--stages", "2", "--replicas", "2", "--microbatches", "2", "--reduce", "p2p"}));
  INFO(flush.err);
  CHECK(flush.exit_code == 2);
  CHECK(contains(flush.err, "--reduce"));
  CHECK(contains(flush.err, "cyclic"));
  const cli_result alone = run_cli(gpt_tiny_train(dir / "text.txt", 2, {"--schedule", "cyclic",
      "--stages", "2", "--microbatches", "2", "--reduce", "p2p"}));
  INFO(alone.err);
  CHECK(alone.exit_code == 2);
  CHECK(contains(alone.err, "--replicas"));
  const cli_result zero = run_cli(cyclic_args(dir, 2, "4", {"--reduce", "p2p", "--zero", "1"}));
  INFO(zero.err);
  CHECK(zero.exit_code == 2);
  CHECK(contains(zero.err, "--zero"));
  const cli_result unknown = run_cli(cyclic_args(dir, 2, "4", {"--reduce", "ring"}));
  CHECK(unknown.exit_code == 2);
  CHECK(contains(unknown.err, "--reduce"));
}

TEST_CASE("schedule and simulate --reduce p2p outside cyclic or from a file exit 2 naming it", "[cli]") {
  scratch_dir dir;
  const cli_result flush = run_cli({"simulate", "--schedule", "1f1b", "--stages", "2",
                                    "--microbatches", "2", "--replicas", "2", "--reduce", "p2p"});
  CHECK(flush.exit_code == 2);
  CHECK(contains(flush.err, "--reduce p2p"));
  CHECK(contains(flush.err, "cyclic"));
  write_file(dir / "s.txt", "0F0 0B0 0STEP\n");
  const cli_result file = run_cli({"schedule", "--schedule-file", dir / "s.txt", "--reduce", "p2p"});
  CHECK(file.exit_code == 2);
  CHECK(contains(file.err, "--reduce"));
  const cli_result ok = run_cli({"schedule", "--schedule", "cyclic", "--stages", "2",
                                 "--microbatches", "4", "--replicas", "2", "--steps", "2",
                                 "--reduce", "p2p"});
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  // Replica 0 (ranks 0 and 1) takes its new version where it first needs it: not right after its
  // REDUCE, as replica 1 (the last) does.
  CHECK(contains(ok.out, "rank 0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0F4 0B3 0REDUCE 0F5 0B4 0F6 0B5 0STEP"));
  CHECK(contains(ok.out, "0B5 0REDUCE 0STEP"));
}
