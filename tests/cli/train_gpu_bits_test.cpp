// `pipeworks train --device cuda` keeps the bits it promises, in fp32, TF32 and bf16: every flush
// schedule ends with --schedule none's saved bytes, a run repeats itself, --recompute and --zero
// change nothing, a run resumed from an earlier checkpoint ends with the same bytes, and GPU ranks on two
// worker processes end as in one. Where there is no GPU, each case checks that the GPU is named as
// unusable (exit 1), or skips saying so.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "fixtures.hpp"
#include "ops/device/device.hpp"
#include "run_cli.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

using args = std::vector<std::string>;

const std::vector<args> precisions{{}, {"--tf32"}, {"--bf16"}};

std::string precision_name(const args& p) { return p.empty() ? "fp32" : p.front(); }

// Trains gpt-tiny 3 steps on the GPU with `more` and returns the saved file's bytes and the last
// JSON report; or, without a GPU, checks the refusal and returns nothing.
struct gpu_run {
  std::string bytes;
  json report;
};
std::optional<gpu_run> train_on_gpu(const scratch_dir& dir, args more, const std::string& name,
                                    int steps = 3) {
  const std::string file = dir / (name + ".safetensors");
  more.insert(more.end(), {"--device", "cuda", "--eval-windows", "1", "--json", "--save", file});
  const cli_result r = run_cli(gpt_tiny_train(dir / "text.txt", steps, more));
  INFO(name << ": " << r.err);
  if (pipeworks::find_gpus().count == 0) {
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "cannot be used"));
    return std::nullopt;
  }
  REQUIRE(r.exit_code == 0);
  gpu_run out{read_file(file), last_json(r)};
  REQUIRE(!out.bytes.empty());
  return out;
}

args with(args a, const args& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("train on a GPU ends with schedule none's bits for every flush schedule in each precision", "[cli][cuda]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<args> flush{
      {"--schedule", "gpipe", "--stages", "2"},
      {"--schedule", "1f1b", "--stages", "2"},
      {"--schedule", "interleaved", "--stages", "2", "--chunks", "2"},
      {"--schedule", "zb-h1", "--stages", "2"},
      {"--schedule", "zb-h2", "--stages", "2"},
      {"--schedule", "bfs", "--stages", "2", "--chunks", "2"},
      {"--schedule", "zbv", "--stages", "2"},
      {"--schedule", "v-half", "--stages", "2"},
      {"--schedule", "v-min", "--stages", "2"},
      {"--schedule", "dualpipev", "--stages", "2"}};
  for (const args& precision : precisions) {
    INFO(precision_name(precision));
    const args common = with({"--microbatches", "4"}, precision);
    const auto none = train_on_gpu(dir, with({"--schedule", "none"}, common), "none");
    if (!none) return;
    const auto again = train_on_gpu(dir, with({"--schedule", "none"}, common), "again");
    CHECK(again->bytes == none->bytes);  // a run repeats bit for bit
    for (const args& kind : flush) {
      INFO(kind[1]);
      const auto run = train_on_gpu(dir, with(kind, common), kind[1]);
      CHECK(run->bytes == none->bytes);
      CHECK(run->report["final_loss"] == none->report["final_loss"]);
    }
  }
}

TEST_CASE("train on a GPU with recompute full and selective ends with the bits of none", "[cli][cuda]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* kind : {"1f1b", "zb-h1", "2bw", "zbv"})
    for (const args& precision : precisions) {
      INFO(kind << ", " << precision_name(precision));
      const args common = with({"--schedule", kind, "--stages", "2", "--microbatches", "4"}, precision);
      const auto none = train_on_gpu(dir, with(common, {"--recompute", "none"}), "none");
      if (!none) return;
      for (const char* mode : {"full", "selective"}) {
        INFO("--recompute " << mode);
        const auto run = train_on_gpu(dir, with(common, {"--recompute", mode}), mode);
        CHECK(run->bytes == none->bytes);
        for (std::size_t s = 0; s < 2; ++s)
          CHECK(run->report["stages"][s]["peak_activation_bytes"].get<std::int64_t>() <=
                none->report["stages"][s]["peak_activation_bytes"].get<std::int64_t>());
      }
    }
}

TEST_CASE("train on a GPU with zero 1 and 2 ends with the bits of zero 0", "[cli][cuda]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* kind : {"1f1b", "2bw"})
    for (const args& precision : precisions) {
      INFO(kind << ", " << precision_name(precision));
      const args common = with(
          {"--schedule", kind, "--stages", "2", "--replicas", "2", "--microbatches", "4"}, precision);
      const auto whole = train_on_gpu(dir, with(common, {"--zero", "0"}), "zero0");
      if (!whole) return;
      for (const char* zero : {"1", "2"}) {
        INFO("--zero " << zero);
        const auto run = train_on_gpu(dir, with(common, {"--zero", zero}), std::string("zero") + zero);
        CHECK(run->bytes == whole->bytes);
        CHECK(run->report["final_loss"] == whole->report["final_loss"]);
      }
    }
}

TEST_CASE("train on a GPU resumes from an earlier checkpoint bit for bit in each precision", "[cli][cuda][checkpoint]") {
  // The run keeps every checkpoint; all but step 2's are then removed, as if it had been killed
  // right after step 2's (on a GPU a killed run could finish first, and no resume be tested).
  scratch_dir dir;
  write_file(dir / "text.txt", small_text(60000));
  constexpr int steps = 8;
  const std::vector<args> layouts{{"--schedule", "none", "--microbatches", "2"},
                                  {"--schedule", "1f1b", "--stages", "2", "--microbatches", "4"}};
  for (const args& precision : precisions)
    for (const args& layout : layouts) {
      INFO(layout[1] << ", " << precision_name(precision));
      const args common = with(layout, precision);
      const auto whole = train_on_gpu(dir, common, "whole", steps);
      if (!whole) return;
      const std::string ckpt = dir / (layout[1] + precision_name(precision));
      REQUIRE(train_on_gpu(dir, with(common, {"--save-every", "2", "--keep", "0", "--checkpoint-dir", ckpt}),
                           "saving", steps));
      for (int step = 4; step <= steps; step += 2) {
        char name[32];
        std::snprintf(name, sizeof name, "step-%08d", step);
        REQUIRE(std::filesystem::remove_all(std::filesystem::path(ckpt) / name) > 0);
      }
      REQUIRE(has_manifest(ckpt, 2));
      const std::string file = dir / "resumed.safetensors";
      const cli_result resumed = run_cli({"train", "--resume", ckpt, "--save", file, "--sample", "0",
                                          "--eval-windows", "1"});
      INFO(resumed.err);
      REQUIRE(resumed.exit_code == 0);
      CHECK(contains(resumed.err + resumed.out, "step 3"));  // it trained from step 3 on
      CHECK(read_file(file) == whole->bytes);
    }
}

TEST_CASE("GPU ranks on two worker processes end with the bits of one process", "[cli][cuda][workers]") {
  if (pipeworks::find_gpus().count == 0) {
    WARN("skipped: no GPU: " << pipeworks::find_gpus().why);
    return;
  }
  scratch_dir dir;
  write_file(dir / "text.txt", small_text(60000));
  worker_cli w1, w2;
  const std::string workers = w1.address() + "," + w2.address();
  const std::vector<args> layouts{{"--schedule", "1f1b", "--stages", "2", "--microbatches", "4"},
                                  {"--schedule", "2bw", "--stages", "2", "--microbatches", "4"},
                                  {"--schedule", "1f1b", "--stages", "2", "--replicas", "2",
                                   "--microbatches", "2"}};
  for (const args& precision : precisions)
    for (const args& layout : layouts) {
      INFO(layout[1] << " with " << layout.size() / 2 << " flags, " << precision_name(precision));
      const auto local = train_on_gpu(dir, with(layout, precision), "local");
      const auto remote = train_on_gpu(dir, with(with(layout, precision), {"--workers", workers}), "remote");
      CHECK(remote->bytes == local->bytes);
      CHECK(remote->report["final_loss"] == local->report["final_loss"]);
    }
}
