// End-to-end tests of `pipeworks checkpoint inspect` (cli/cmd_checkpoint.cpp) on a checkpoint
// directory built with write_safetensors and write_manifest: the report and its JSON, the choice
// of step, exit 1 naming the file for a corrupt, missing or unreadable one, and exit 2 for bad flags.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ops/checkpoint/safetensors.hpp"
#include "run_cli.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/run_plan.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Two ranks: rank 0 holds the embedding with an older version and Adam's m and v, rank 1 the
// head with its gradient and an in-flight activation.
void write_checkpoint(const std::string& dir, std::int64_t step) {
  REQUIRE(prepare_step_dir(dir, step).ok());
  const std::vector<float> wte(8, 0.5f), head(6, static_cast<float>(step)), act(3, 1.0f);
  const std::vector<std::vector<safetensors_entry>> ranks = {
      {entry_of("transformer.wte.weight", {4, 2}, std::span(wte)),
       entry_of("pipeworks.version.5/transformer.wte.weight", {4, 2}, std::span(wte)),
       entry_of("pipeworks.optim.m/transformer.wte.weight", {4, 2}, std::span(wte)),
       entry_of("pipeworks.optim.v/transformer.wte.weight", {4, 2}, std::span(wte))},
      {entry_of("lm_head.weight", {2, 3}, std::span(head)),
       entry_of("transformer.ln_f.weight", {3}, std::span(act)),
       entry_of("pipeworks.grad/lm_head.weight", {2, 3}, std::span(head)),
       entry_of("pipeworks.inflight.mb3/activation", {3}, std::span(act))}};
  checkpoint_manifest m;
  m.step = step;
  m.data_position = step;  // the next minibatch is the step's: pipeworks refuses any other
  m.plan = json::parse(to_json_text(test::small_plan(2, step)));
  m.rng = json::object();
  m.metrics = {{"samples", 8 * step}};
  for (int r = 0; r < 2; ++r) {
    const std::string name = rank_file_name(r);
    // The metadata a rank file of this plan, rank and step carries (its identity and state).
    metadata_map md = rank_identity(test::small_plan(2, step), r);
    md["pipeworks.rank_state"] = json{{"rank", r}, {"step", step}}.dump();
    auto w = write_safetensors(step_dir(dir, step) + "/" + name, ranks[static_cast<std::size_t>(r)], md);
    REQUIRE(w.ok());
    m.files.push_back({r, name, w->bytes, w->sha256});
  }
  REQUIRE(write_manifest(dir, m).ok());
}

std::uint64_t file_size(const std::string& path) { return fs::file_size(path); }

}  // namespace

TEST_CASE("checkpoint inspect reports the latest checkpoint and its tensors by group", "[cli]") {
  scratch_dir dir;
  const std::string ck = dir / "ck";
  write_checkpoint(ck, 5);
  write_checkpoint(ck, 10);
  fs::create_directories(step_dir(ck, 15));  // cut short: not chosen
  const cli_result r = run_cli({"checkpoint", "inspect", ck});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const auto lines = nonempty_lines(r.out);
  const std::string size0 = std::to_string(file_size(step_dir(ck, 10) + "/rank-0.safetensors"));
  const std::string size1 = std::to_string(file_size(step_dir(ck, 10) + "/rank-1.safetensors"));
  const std::vector<std::string> want = {
      "checkpoint " + step_dir(ck, 10) + ": step 10, data position 10",
      "plan: model gpt-tiny (gpt), schedule 1f1b, stages 2, microbatches 4, replicas 1",
      "metrics: {\"samples\":80}",
      "rank 0: rank-0.safetensors, " + size0 + " bytes, sha256 OK",
      "  weights: 1 tensors, 32 bytes",
      "  pipeworks.optim.m: 1 tensors, 32 bytes",
      "  pipeworks.optim.v: 1 tensors, 32 bytes",
      "  pipeworks.version.5: 1 tensors, 32 bytes",
      "rank 1: rank-1.safetensors, " + size1 + " bytes, sha256 OK",
      "  weights: 2 tensors, 36 bytes",
      "  pipeworks.grad: 1 tensors, 24 bytes",
      "  pipeworks.inflight.mb3: 1 tensors, 12 bytes",
      "all 2 files verified"};
  CHECK(lines == want);
}

TEST_CASE("checkpoint inspect --step --json picks that step and prints one JSON object", "[cli]") {
  scratch_dir dir;
  const std::string ck = dir / "ck";
  write_checkpoint(ck, 5);
  write_checkpoint(ck, 10);
  const cli_result r = run_cli({"checkpoint", "inspect", ck, "--step", "5", "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["step"] == 5);
  CHECK(j["data_position"] == 5);
  CHECK(j["verified"] == true);
  CHECK(j["plan"] == "model gpt-tiny (gpt), schedule 1f1b, stages 2, microbatches 4, replicas 1");
  REQUIRE(j["files"].size() == 2);
  const json& f1 = j["files"][1];
  CHECK(f1["rank"] == 1);
  CHECK(f1["path"] == "rank-1.safetensors");
  CHECK(f1["verified"] == true);
  CHECK(f1["bytes"] == file_size(step_dir(ck, 5) + "/rank-1.safetensors"));
  CHECK(f1["sha256"].get<std::string>().size() == 64);
  CHECK(f1["tensors"] == json::parse(R"([{"group": "weights", "count": 2, "bytes": 36},
    {"group": "pipeworks.grad", "count": 1, "bytes": 24},
    {"group": "pipeworks.inflight.mb3", "count": 1, "bytes": 12}])"));
}

TEST_CASE("checkpoint inspect exits 1 naming a corrupt or missing file", "[cli]") {
  scratch_dir dir;
  const std::string ck = dir / "ck";
  write_checkpoint(ck, 10);
  const std::string rank1 = step_dir(ck, 10) + "/rank-1.safetensors";
  {
    std::fstream f(rank1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(file_size(rank1) - 1));
    f.put('\x7f');
  }
  const cli_result flipped = run_cli({"checkpoint", "inspect", ck});
  INFO("stdout:\n" << flipped.out << "\nstderr:\n" << flipped.err);
  CHECK(flipped.exit_code == 1);
  CHECK(contains(flipped.err, rank1 + ": sha256 is "));
  CHECK(contains(flipped.err, "the manifest records"));
  CHECK(contains(flipped.out, "rank 0: rank-0.safetensors, "));
  CHECK(contains(flipped.out, "bytes, FAILED: " + rank1));
  CHECK_FALSE(contains(flipped.out, "all 2 files verified"));

  const cli_result as_json = run_cli({"checkpoint", "inspect", ck, "--json"});
  CHECK(as_json.exit_code == 1);
  const json j = json::parse(as_json.out);
  CHECK(j["verified"] == false);
  CHECK(j["files"][0]["verified"] == true);
  CHECK(j["files"][1]["verified"] == false);
  CHECK(contains(j["files"][1]["error"].get<std::string>(), "sha256 is"));

  fs::remove(step_dir(ck, 10) + "/rank-0.safetensors");
  const cli_result missing = run_cli({"checkpoint", "inspect", ck});
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.err, step_dir(ck, 10) + "/rank-0.safetensors is missing"));
}

TEST_CASE("checkpoint inspect exits 1 naming an unreadable manifest or an empty directory",
          "[cli]") {
  scratch_dir dir;
  const std::string ck = dir / "ck";
  write_checkpoint(ck, 10);
  std::ofstream(step_dir(ck, 10) + "/manifest.json") << R"({"format": "pipeworks-checkpoint"})";
  const cli_result broken = run_cli({"checkpoint", "inspect", ck, "--step", "10"});
  CHECK(broken.exit_code == 1);
  CHECK(contains(broken.err, step_dir(ck, 10) + "/manifest.json: missing field \"version\""));

  // The newest manifest damaged is named as such, never passed over for an older checkpoint.
  const cli_result damaged = run_cli({"checkpoint", "inspect", ck});
  CHECK(damaged.exit_code == 1);
  CHECK(contains(damaged.err, "the newest checkpoint's manifest is unreadable or damaged"));

  fs::remove(step_dir(ck, 10) + "/manifest.json");
  const cli_result none = run_cli({"checkpoint", "inspect", ck});
  CHECK(none.exit_code == 1);
  CHECK(contains(none.err, ck + " holds no complete checkpoint"));

  const cli_result absent = run_cli({"checkpoint", "inspect", dir / "nope"});
  CHECK(absent.exit_code == 1);
  CHECK(contains(absent.err, dir / "nope"));
}

TEST_CASE("a manifest that lists fewer files than its plan has ranks is named by inspect and resume",
          "[cli]") {
  scratch_dir dir;
  const std::string ck = dir / "ck";
  write_checkpoint(ck, 10);
  auto m = read_manifest(ck, 10);
  REQUIRE(m.ok());
  m->files.pop_back();  // rank 1's entry gone: ranks 0..0 still read as a well-formed list
  fs::remove(step_dir(ck, 10) + "/manifest.json");
  REQUIRE(write_manifest(ck, *m).ok());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"checkpoint", "inspect", ck},
        std::vector<std::string>{"train", "--resume", ck}}) {
    const cli_result r = run_cli(args);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "files lists 1 rank files but its plan has 2 ranks"));
  }
}

TEST_CASE("checkpoint with bad flags exits 2", "[cli]") {
  const cli_result none = run_cli({"checkpoint"});
  CHECK(none.exit_code == 2);
  CHECK(contains(none.err, "needs a command: inspect, export, reshard"));
  // A flag of a command of checkpoint, without a required one, is not called unknown.
  const cli_result no_out = run_cli({"checkpoint", "reshard", "/tmp", "--stages", "1"});
  CHECK(no_out.exit_code == 2);
  CHECK(contains(no_out.err, "--out is required"));
  const cli_result unknown = run_cli({"checkpoint", "prune", "/tmp"});
  CHECK(unknown.exit_code == 2);
  CHECK(contains(unknown.err, "unknown checkpoint command 'prune'; known: inspect, export, reshard"));
  CHECK(run_cli({"checkpoint", "inspect"}).exit_code == 2);
  CHECK(run_cli({"checkpoint", "inspect", "/tmp", "--step", "-3"}).exit_code == 2);
  CHECK(run_cli({"checkpoint", "inspect", "/tmp", "--frobnicate"}).exit_code == 2);
}
