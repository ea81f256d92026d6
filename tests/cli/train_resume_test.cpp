// Resumable runs through the CLI: for every schedule, a run killed with SIGKILL after its first
// checkpoint and resumed with --resume (every other one with other --threads, --actors and
// --credits) ends with the weights and per-step losses of a run that was never interrupted, bit
// for bit; --print-plan then --plan reproduces a run; bad checkpoints are
// refused naming the file and field, and nothing in them is overwritten; --init starts a new run
// from saved weights.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "background_cli.hpp"
#include "fixtures.hpp"
#include "manifest_edit.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The per-step losses of a --metrics file, by step.
std::map<int, double> losses_of(const std::string& path) {
  std::map<int, double> out;
  for (const std::string& line : nonempty_lines(read_file(path))) {
    const json j = json::parse(line);
    if (j.contains("step") && j.contains("loss") && !j.contains("final_loss"))
      out[j["step"].get<int>()] = j["loss"].get<double>();
  }
  return out;
}

struct schedule_case {
  std::string kind;
  std::vector<std::string> shape;  // --stages ... --replicas ...
};

const std::vector<schedule_case> every_schedule = {
    {"gpipe", {"--stages", "2", "--replicas", "2"}},
    {"1f1b", {"--stages", "2", "--replicas", "2"}},
    {"interleaved", {"--stages", "2", "--chunks", "2", "--replicas", "2"}},
    {"zb-h1", {"--stages", "2", "--replicas", "2"}},
    {"zb-h2", {"--stages", "2", "--replicas", "2"}},
    {"bfs", {"--stages", "2", "--chunks", "2", "--replicas", "2"}},
    {"pipedream", {"--stages", "2", "--replicas", "2"}},
    {"pipedream-vs", {"--stages", "2", "--replicas", "2"}},
    {"2bw", {"--stages", "2", "--replicas", "2"}},
    {"cyclic", {"--stages", "2", "--replicas", "2"}},
    {"zbv", {"--stages", "2", "--replicas", "2"}},
    {"v-half", {"--stages", "2"}},
    {"v-min", {"--stages", "2"}},
    {"dualpipev", {"--stages", "2", "--replicas", "2"}},
    {"dualpipe", {"--stages", "2"}},
};

std::vector<std::string> gpt_run(const std::string& text, const schedule_case& c, int steps,
                                 std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "gpt-tiny", "--data", text, "--steps",
                             std::to_string(steps), "--batch", "16", "--microbatches", "4",
                             "--schedule", c.kind, "--sample", "0", "--eval-windows", "4",
                             "--optimizer", "adamw", "--lr", "3e-3"};
  a.insert(a.end(), c.shape.begin(), c.shape.end());
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("every schedule resumes after SIGKILL bit for bit", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  std::mt19937 rng(20261123);
  const int steps = 12;
  for (const schedule_case& c : every_schedule) {
    INFO(c.kind);
    const std::string tag = dir / c.kind;
    const cli_result whole = run_cli(gpt_run(text, c, steps, {"--save", tag + "-whole.safetensors",
                                                              "--metrics", tag + "-whole.jsonl"}));
    INFO(whole.err);
    REQUIRE(whole.exit_code == 0);

    const std::string ckpt = tag + "-ckpt";
    {
      background_cli run(gpt_run(text, c, steps, {"--save-every", "2", "--checkpoint-dir", ckpt}));
      REQUIRE(run.wait_for([&] { return has_manifest(ckpt, 2); }));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
      run.kill();
      run.wait();
    }
    // Every other run resumes with what may change on a resume without changing a result: the
    // threads, the actors' kind and the credit window.
    std::vector<std::string> resume{"train", "--resume", ckpt, "--save", tag + "-resumed.safetensors",
                                    "--metrics", tag + "-resumed.jsonl", "--sample", "0",
                                    "--eval-windows", "4"};
    if ((&c - every_schedule.data()) % 2 == 1)
      resume.insert(resume.end(), {"--threads", "1", "--actors", "pooled", "--credits", "16"});
    const cli_result resumed = run_cli(resume);
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(read_file(tag + "-resumed.safetensors") == read_file(tag + "-whole.safetensors"));
    const auto want = losses_of(tag + "-whole.jsonl");
    const auto got = losses_of(tag + "-resumed.jsonl");
    REQUIRE_FALSE(got.empty());
    CHECK(got.rbegin()->first == steps);
    for (const auto& [step, loss] : got) {
      INFO("step " << step);
      CHECK(loss == want.at(step));
    }
  }
}

TEST_CASE("a checkpoint one step before the end completes with one microbatch and resumes bit for bit",
          "[cli][checkpoint]") {
  // With one microbatch a rank can end its program before a peer's marker of the last checkpoint
  // comes; it must still take the marker and write its file (it used to drop it: the run hung).
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  const std::vector<schedule_case> cases = {
      {"pipedream", {"--stages", "2"}},
      {"pipedream-vs", {"--stages", "2"}},
      {"cyclic", {"--stages", "2"}},
      {"cyclic", {"--stages", "2", "--replicas", "2"}},
      {"pipedream", {"--stages", "2", "--replicas", "2"}},
  };
  int n = 0;
  for (const schedule_case& c : cases) {
    INFO(c.kind << " with " << c.shape.size() / 2 << " shape flags");
    const std::string tag = dir / (c.kind + std::to_string(n++));
    auto one_mb = [&](std::vector<std::string> more) {
      auto a = gpt_run(text, c, 6, std::move(more));
      for (std::size_t i = 0; i + 1 < a.size(); ++i)
        if (a[i] == "--microbatches") a[i + 1] = "1";
        else if (a[i] == "--batch") a[i + 1] = "8";
      return a;
    };
    const cli_result whole = run_cli(one_mb({"--save", tag + "-whole.safetensors"}));
    INFO(whole.err);
    REQUIRE(whole.exit_code == 0);
    background_cli run(one_mb({"--save-every", "5", "--checkpoint-dir", tag + "-ckpt"}));
    REQUIRE(run.wait_exit(std::chrono::seconds(120)));  // a guard against the hang it once had
    const cli_result saved = run.wait();
    INFO(saved.err);
    REQUIRE(saved.exit_code == 0);
    REQUIRE(has_manifest(tag + "-ckpt", 5));
    const cli_result resumed = run_cli({"train", "--resume", tag + "-ckpt", "--save",
                                        tag + "-resumed.safetensors", "--sample", "0",
                                        "--eval-windows", "4"});
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(read_file(tag + "-resumed.safetensors") == read_file(tag + "-whole.safetensors"));
  }
}

TEST_CASE("a SIGKILL while checkpoints are written leaves the latest complete one loadable", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  std::mt19937 rng(7);
  const schedule_case c{"2bw", {"--stages", "2"}};
  for (int attempt = 0; attempt < 6; ++attempt) {
    const std::string ckpt = dir / ("ckpt-" + std::to_string(attempt));
    {
      // A checkpoint after every step: most moments of the run are inside a write.
      background_cli run(gpt_run(text, c, 40, {"--save-every", "1", "--checkpoint-dir", ckpt}));
      REQUIRE(run.wait_for([&] { return has_manifest(ckpt, 1); }));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 60)(rng)));
      run.kill();
      run.wait();
    }
    const cli_result inspect = run_cli({"checkpoint", "inspect", ckpt});
    INFO(inspect.out << inspect.err);
    CHECK(inspect.exit_code == 0);
    const cli_result resumed = run_cli({"train", "--resume", ckpt, "--steps", "40", "--sample", "0",
                                        "--eval-windows", "4"});
    INFO(resumed.err);
    CHECK(resumed.exit_code == 0);
    // No temporary file of the killed run outlives the run that continued it.
    for (const auto& e : fs::recursive_directory_iterator(ckpt))
      CHECK(e.path().filename().string().rfind('.', 0) == std::string::npos);
  }
}

TEST_CASE("a corrupt or missing checkpoint file or another model is refused naming it", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  const schedule_case c{"1f1b", {"--stages", "2"}};
  const std::string ckpt = dir / "ckpt";
  REQUIRE(run_cli(gpt_run(text, c, 4, {"--save-every", "2", "--checkpoint-dir", ckpt})).exit_code == 0);
  const fs::path step = fs::path(ckpt) / "step-00000002";
  const std::string rank1 = (step / "rank-1.safetensors").string();
  const std::string good = read_file(rank1);

  // Another model or schedule than the checkpoint's: exit 2 naming the flag, nothing touched.
  cli_result r = run_cli({"train", "--resume", ckpt, "--model", "gpt-small"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--model"));
  r = run_cli({"train", "--resume", ckpt, "--schedule", "gpipe"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--schedule"));
  // Flags the resumed run could not honour are refused, not ignored.
  r = run_cli({"train", "--resume", ckpt, "--epochs", "1"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--epochs"));
  r = run_cli({"train", "--resume", ckpt, "--checkpoint-dir", dir / "elsewhere"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--checkpoint-dir"));
  CHECK_FALSE(fs::exists(dir / "elsewhere"));

  // One flipped byte: the checksum names the file.
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x40;
  write_file(rank1, bad);
  r = run_cli({"train", "--resume", ckpt});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "rank-1.safetensors"));
  CHECK(contains(r.err, "sha256"));
  CHECK(read_file(rank1) == bad);  // nothing was rewritten

  // A missing file.
  fs::remove(rank1);
  r = run_cli({"train", "--resume", ckpt});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "rank-1.safetensors"));
  write_file(rank1, good);

  // A manifest that names another model: the field is named. The manifest's own sha256 is made
  // to match (else it is refused as edited, exit 1); the rank files' recorded model is then
  // checked against it before any rank starts (exit 2).
  const std::string manifest_path = (step / "manifest.json").string();
  const std::string manifest = read_file(manifest_path);
  edit_manifest(manifest_path, [](nlohmann::ordered_json& m) {
    m["plan"]["model"]["layers"] = 3;
    m["plan"]["model"]["name"] = "three-layers.json";  // gpt-tiny's name needs gpt-tiny's fields
  }, true);
  r = run_cli({"train", "--resume", ckpt});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "rank-0.safetensors"));  // the first rank's file names it
  CHECK(contains(r.err, "pipeworks.model"));
  write_file(manifest_path, manifest);
  // --save-every 0 resumes without writing more checkpoints.
  r = run_cli({"train", "--resume", ckpt, "--save-every", "0", "--sample", "0", "--eval-windows", "4"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(run_cli({"train", "--resume", ckpt, "--sample", "0", "--eval-windows", "4"}).exit_code == 0);

  // A new run into a directory that holds checkpoints is refused.
  r = run_cli(gpt_run(text, c, 4, {"--save-every", "2", "--checkpoint-dir", ckpt}));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--checkpoint-dir"));
  CHECK(contains(r.err, "--resume"));
}

TEST_CASE("print-plan then plan gives bit-identical weights", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  const schedule_case c{"2bw", {"--stages", "2", "--split", "0,3"}};
  const std::string plan = dir / "plan.json";
  cli_result r = run_cli(gpt_run(text, c, 4, {"--print-plan", plan}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(read_file(plan));
  CHECK(p["split"] == json::array({0, 3}));
  CHECK(p["schedule"]["kind"] == "2bw");
  REQUIRE(run_cli(gpt_run(text, c, 4, {"--save", dir / "a.safetensors"})).exit_code == 0);
  r = run_cli({"train", "--plan", plan, "--save", dir / "b.safetensors", "--sample", "0"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(dir / "a.safetensors") == read_file(dir / "b.safetensors"));
  // --plan holds the whole run: a flag that would change it is refused.
  r = run_cli({"train", "--plan", plan, "--steps", "9"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--steps"));
  // An unknown field names itself.
  json bad = p;
  bad["schedule"]["stagse"] = 2;
  write_file(dir / "bad.json", bad.dump());
  r = run_cli({"train", "--plan", dir / "bad.json"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "stagse"));
}

TEST_CASE("print-plan after auto-partition then plan gives bit-identical weights", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string plan = dir / "plan.json";
  const std::vector<std::string> base{"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                      "--steps", "3", "--batch", "32", "--auto-partition"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  cli_result r = run_cli(with({"--print-plan", plan}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "auto-partition: planner pipedream"));
  const json p = json::parse(read_file(plan));
  CHECK(p["auto_partition"].is_null());  // resolved: the plan runs as it is, no planner again
  r = run_cli({"train", "--plan", plan, "--save", dir / "a.safetensors"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_cli({"train", "--plan", plan, "--save", dir / "b.safetensors"});
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(dir / "a.safetensors") == read_file(dir / "b.safetensors"));
}

TEST_CASE("init starts a new run from saved weights or a checkpoint", "[cli][checkpoint]") {
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  const schedule_case c{"1f1b", {"--stages", "2"}};
  REQUIRE(run_cli(gpt_run(text, c, 4, {"--save", dir / "first.safetensors", "--save-every", "2",
                                       "--checkpoint-dir", dir / "ckpt"})).exit_code == 0);
  // From the whole-model file and from the checkpoint directory: a new run (step 1 onwards).
  for (const std::string from : {dir / "first.safetensors", dir / "ckpt"}) {
    INFO(from);
    const cli_result r = run_cli(gpt_run(text, c, 2, {"--init", from, "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  // The two starting points differ (step 4 against step 2), and so do their first losses.
  const cli_result a = run_cli(gpt_run(text, c, 1, {"--init", dir / "first.safetensors", "--json"}));
  const cli_result b = run_cli(gpt_run(text, c, 1, {"--init", dir / "ckpt", "--json"}));
  const cli_result fresh = run_cli(gpt_run(text, c, 1, {"--json"}));
  const double la = json::parse(nonempty_lines(a.out).front())["loss"];
  const double lb = json::parse(nonempty_lines(b.out).front())["loss"];
  const double lf = json::parse(nonempty_lines(fresh.out).front())["loss"];
  CHECK(la < lf);  // trained weights predict the text better than fresh ones
  CHECK(lb < lf);
  CHECK(la != lb);
  const cli_result missing = run_cli(gpt_run(text, c, 1, {"--init", dir / "nope.safetensors"}));
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.err, "nope.safetensors"));
}
