// `pipeworks checkpoint reshard`: a flush schedule's checkpoint re-cut for other stages, chunks,
// replicas or schedule (none included) resumes to the bits of the run never interrupted; an
// asynchronous schedule's checkpoint, an asynchronous target and an output inside the checkpoint
// directory or over another checkpoint are refused, naming why, and write nothing.
#include <catch2/catch.hpp>

#include <filesystem>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

std::vector<std::string> gpt(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "1"});
  return gpt_tiny_train(dir / "text.txt", 6, std::move(more));
}


// Re-cuts `from` into `to` with the layout options, then resumes it to the end, saving `save`.
std::string reshard_and_resume(const scratch_dir& dir, const std::string& from, const std::string& to,
                               std::vector<std::string> layout) {
  std::vector<std::string> args{"checkpoint", "reshard", from, "--out", to};
  args.insert(args.end(), layout.begin(), layout.end());
  run_ok(args);
  const std::string save = dir / (std::filesystem::path(to).filename().string() + ".safetensors");
  run_ok({"train", "--resume", to, "--save", save});
  return read_file(save);
}

}  // namespace

TEST_CASE("a re-cut flush checkpoint resumes to the bits of the uninterrupted run", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string whole = dir / "whole.safetensors", ck = dir / "ck";
  run_ok(gpt(dir, {"--schedule", "1f1b", "--stages", "4", "--microbatches", "4", "--save", whole}));
  run_ok(gpt(dir, {"--schedule", "1f1b", "--stages", "4", "--microbatches", "4", "--save-every",
                   "3", "--checkpoint-dir", ck}));
  const std::string want = read_file(whole);
  REQUIRE(!want.empty());
  // Other stages, a split of the caller's, other schedules, interleaving, and one device.
  CHECK(reshard_and_resume(dir, ck, dir / "p2", {"--stages", "2"}) == want);
  CHECK(reshard_and_resume(dir, ck, dir / "p3", {"--schedule", "gpipe", "--stages", "3",
                                                 "--split", "0,1,3"}) == want);
  CHECK(reshard_and_resume(dir, ck, dir / "v2", {"--schedule", "interleaved", "--stages", "2",
                                                 "--chunks", "2"}) == want);
  CHECK(reshard_and_resume(dir, ck, dir / "none", {"--schedule", "none"}) == want);
  // Into a V (its two chunks per device taken without --chunks) and out of it again.
  CHECK(reshard_and_resume(dir, ck, dir / "zbv", {"--schedule", "zbv", "--stages", "2"}) == want);
  CHECK(reshard_and_resume(dir, dir / "zbv", dir / "from-v", {"--schedule", "1f1b", "--stages",
                                                              "3"}) == want);
  // From one device back to a pipeline.
  const std::string single = dir / "single";
  run_ok(gpt(dir, {"--microbatches", "4", "--save-every", "3", "--checkpoint-dir", single}));
  CHECK(reshard_and_resume(dir, single, dir / "from-none", {"--schedule", "1f1b", "--stages",
                                                            "4"}) == want);
  // Two replicas and back (replicas change the order of the gradient's sums, so the way back
  // is what must keep every bit).
  run_ok({"checkpoint", "reshard", ck, "--out", dir / "w2", "--stages", "2", "--replicas", "2",
          "--microbatches", "2"});
  CHECK(reshard_and_resume(dir, dir / "w2", dir / "back", {"--stages", "4", "--replicas", "1",
                                                           "--microbatches", "4"}) == want);
}

TEST_CASE("a re-cut keeps replicas bit for bit under the same replica count", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string whole = dir / "whole.safetensors", ck = dir / "ck";
  const std::vector<std::string> w2{"--schedule", "gpipe", "--stages", "4", "--replicas", "2",
                                    "--microbatches", "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = w2;
    a.insert(a.end(), more.begin(), more.end());
    return gpt(dir, a);
  };
  run_ok(with({"--save", whole}));
  run_ok(with({"--save-every", "3", "--checkpoint-dir", ck}));
  CHECK(reshard_and_resume(dir, ck, dir / "p2", {"--schedule", "1f1b", "--stages", "2"}) ==
        read_file(whole));
}

TEST_CASE("checkpoint reshard refuses what cannot be re-cut and writes nothing", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string ck = dir / "ck", async = dir / "async";
  run_ok(gpt(dir, {"--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--save-every",
                   "3", "--checkpoint-dir", ck}));
  run_ok(gpt(dir, {"--schedule", "2bw", "--stages", "2", "--microbatches", "2", "--save-every",
                   "3", "--checkpoint-dir", async}));
  const cli_result from_async = run_cli({"checkpoint", "reshard", async, "--out", dir / "a", "--stages", "4"});
  CHECK(from_async.exit_code == 2);
  CHECK(contains(from_async.err, "2bw, an asynchronous schedule"));
  CHECK(contains(from_async.err, "--restart-pipeline"));
  CHECK(!std::filesystem::exists(dir / "a"));
  const cli_result to_async = run_cli({"checkpoint", "reshard", ck, "--out", dir / "b", "--schedule", "2bw"});
  CHECK(to_async.exit_code == 2);
  CHECK(contains(to_async.err, "--schedule"));
  CHECK(!std::filesystem::exists(dir / "b"));
  const cli_result inside = run_cli({"checkpoint", "reshard", ck, "--out", ck + "/sub"});
  CHECK(inside.exit_code == 2);
  CHECK(contains(inside.err, "inside"));
  CHECK(!std::filesystem::exists(ck + "/sub"));
  const cli_result over = run_cli({"checkpoint", "reshard", ck, "--out", async});
  CHECK(over.exit_code == 2);
  CHECK(contains(over.err, "already holds checkpoints"));
  CHECK(has_manifest(async, 3));
  const cli_result split = run_cli({"checkpoint", "reshard", ck, "--out", dir / "c", "--stages",
                                    "2", "--split", "0,9"});
  CHECK(split.exit_code == 2);
  CHECK(contains(split.err, "--split"));
  // More stages than the model has blocks: named by the flag, not the plan's field.
  const cli_result many = run_cli({"checkpoint", "reshard", ck, "--out", dir / "d", "--stages", "5"});
  INFO(many.err);
  CHECK(many.exit_code == 2);
  CHECK(contains(many.err, "--stages"));
  CHECK_FALSE(contains(many.err, "schedule.stages"));
  CHECK(!std::filesystem::exists(dir / "d"));
  // --resume on another layout points at reshard for a flush checkpoint, at --init otherwise.
  const cli_result flush = run_cli({"train", "--resume", ck, "--stages", "4"});
  CHECK(flush.exit_code == 2);
  CHECK(contains(flush.err, "pipeworks checkpoint reshard DIR --out NEWDIR"));
  const cli_result asynchronous = run_cli({"train", "--resume", async, "--stages", "4"});
  CHECK(asynchronous.exit_code == 2);
  CHECK(contains(asynchronous.err, "asynchronous schedule's checkpoint"));
  CHECK(contains(asynchronous.err, "--init"));
}
