// `train --memory-limit`: a rank predicted to hold more than the limit is refused before anything
// trains (exit 2), naming the rank, its bytes by kind and what each --recompute mode (and, with
// replicas, --zero 1; on GPU ranks, --offload) would make it; a run that fits trains; byte counts
// read with K, M and G.
#include <catch2/catch.hpp>

#include "cli/memory_limit.hpp"
#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

std::vector<std::string> gpt(const scratch_dir& dir, std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                             "--batch", "16", "--steps", "1", "--sample", "0", "--eval-windows", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("train --memory-limit refuses a rank over it naming what would fit", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::string> gpipe{"--schedule", "gpipe", "--stages", "2", "--microbatches", "8"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = gpipe;
    a.insert(a.end(), more.begin(), more.end());
    return gpt(dir, a);
  };
  // gpt-tiny's stage 0 under GPipe holds all 8 microbatches' stashes: 4.5 MiB of a 6.0 MiB peak;
  // recomputing everything holds 8 inputs and one stash: 2.1 MiB in all.
  const cli_result over = run_cli(with({"--memory-limit", "3M"}));
  INFO(over.err);
  CHECK(over.exit_code == 2);
  CHECK(contains(over.err, "--memory-limit"));
  CHECK(contains(over.err, "rank 0 (virtual stages 0) is predicted to hold"));
  CHECK(contains(over.err, "stashed activations"));
  CHECK(contains(over.err, "--recompute full would make it"));
  CHECK(contains(over.err, "(fits)"));
  CHECK(over.out.find("step") == std::string::npos);  // nothing trained
  const cli_result fits = run_cli(with({"--memory-limit", "3M", "--recompute", "full"}));
  INFO(fits.err);
  CHECK(fits.exit_code == 0);
  const cli_result roomy = run_cli(with({"--memory-limit", "1G"}));
  CHECK(roomy.exit_code == 0);
  const cli_result single = run_cli(gpt(dir, {"--memory-limit", "64K"}));
  CHECK(single.exit_code == 2);
  CHECK(contains(single.err, "a pipeline schedule with --stages"));
  const cli_result bad = run_cli(gpt(dir, {"--memory-limit", "12X"}));
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "'12X' is not a byte count"));
}

TEST_CASE("train --memory-limit with replicas names what --zero 1 would make it", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::string> replicated{"--schedule", "1f1b", "--stages", "2", "--replicas", "2",
                                            "--microbatches", "4"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = replicated;
    a.insert(a.end(), more.begin(), more.end());
    return gpt(dir, a);
  };
  // gpt-tiny's stage 0: 2.6 MiB at its peak, 550 KiB of it AdamW's moments; each of 2 replicas
  // keeping about half of them under --zero 1 holds 2.4 MiB.
  const cli_result over = run_cli(with({"--memory-limit", "2.5M"}));
  INFO(over.err);
  CHECK(over.exit_code == 2);
  CHECK(contains(over.err, "--zero 0)"));
  CHECK(contains(over.err, "--zero 1 (with --recompute none) would make it 2.4 MiB (fits)"));
  const cli_result fits = run_cli(with({"--memory-limit", "2.5M", "--zero", "1"}));
  INFO(fits.err);
  CHECK(fits.exit_code == 0);
}

TEST_CASE("memory limits read as bytes with K M and G", "[cli]") {
  using pipeworks::cli::parse_bytes;
  CHECK(parse_bytes("1000").value() == 1000);
  CHECK(parse_bytes("64K").value() == 64 << 10);
  CHECK(parse_bytes("512M").value() == std::int64_t{512} << 20);
  CHECK(parse_bytes("1.5G").value() == std::int64_t{3} << 29);
  CHECK(parse_bytes("2GiB").value() == std::int64_t{2} << 30);
  for (const char* bad : {"", "0", "-5M", "1T", "M", "1e400", "nan"}) {
    INFO(bad);
    CHECK(!parse_bytes(bad).ok());
  }
}

TEST_CASE("train --memory-limit names what --offload would make a GPU rank and not a CPU rank", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::string> gpipe{"--schedule", "gpipe", "--stages", "2", "--microbatches", "8",
                                       "--memory-limit", "3M"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = gpipe;
    a.insert(a.end(), more.begin(), more.end());
    return gpt(dir, a);
  };
  // Predicted before any GPU is opened, so this runs without one. gpt-tiny's stage 0 under
  // GPipe: 6.0 MiB, 4.5 MiB of it 8 stashes; activation offload keeps 2 of them on the device.
  const cli_result gpu = run_cli(with({"--device", "cuda"}));
  INFO(gpu.err);
  CHECK(gpu.exit_code == 2);
  CHECK(contains(gpu.err, "rank 0 (virtual stages 0) is predicted to hold 6.0 MiB"));
  CHECK(contains(gpu.err, "--offload optimizer (with --recompute none) would make it 5.5 MiB "
                          "(does not fit)"));
  CHECK(contains(gpu.err, "--offload activations (with --recompute none) would make it 2.6 MiB "
                          "(fits)"));
  CHECK(contains(gpu.err, "--offload optimizer,activations (with --recompute none) would make it"));
  // Offloading the optimizer already: the figure is the GPU's, the moments named apart, and the
  // advice names only what offloads more.
  const cli_result offloaded = run_cli(with({"--device", "cuda", "--offload", "optimizer"}));
  INFO(offloaded.err);
  CHECK(offloaded.exit_code == 2);
  CHECK(contains(offloaded.err, "is predicted to hold 5.5 MiB"));
  CHECK(contains(offloaded.err, "less 550.5 KiB offloaded to host memory (--recompute none, "
                                "--zero 0, --offload optimizer)"));
  CHECK(contains(offloaded.err, "--offload optimizer,activations (with --recompute none) would "
                                "make it 2.1 MiB (fits)"));
  CHECK_FALSE(contains(offloaded.err, "--offload activations ("));
  const cli_result cpu = run_cli(with({}));
  INFO(cpu.err);
  CHECK(cpu.exit_code == 2);
  CHECK(contains(cpu.err, "--recompute full would make it"));
  CHECK_FALSE(contains(cpu.err, "--offload"));
}
