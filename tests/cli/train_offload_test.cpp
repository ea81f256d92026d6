// `pipeworks train --offload`: on a CPU rank it is refused naming the flag, the rank and what to
// do (exit 2); on GPU ranks (where a GPU is present) each kind ends with the bits of the run
// without it and a lower GPU peak; a bad list names the flag; a plan file carries
// runtime.offload, and --print-plan writes none by default.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "ops/device/device.hpp"
#include "run_cli.hpp"
#include "runtime/offload_mode.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> gpt_args(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "1", "--schedule", "1f1b", "--stages", "2",
                             "--microbatches", "2"});
  return gpt_tiny_train(dir / "text.txt", 2, std::move(more));
}

}  // namespace

TEST_CASE("train --offload on a CPU rank exits 2 naming the flag the rank and what to do", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* what : {"optimizer", "activations", "optimizer,activations"}) {
    const cli_result r = run_cli(gpt_args(dir, {"--offload", what}));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--offload: is " + pipeworks::offload_name(*pipeworks::parse_offload(what))));
    CHECK(contains(r.err, "rank 0 (stage 0, replica 0) runs on the CPU"));
    CHECK(contains(r.err, "host memory already"));
    CHECK(contains(r.err, "Drop --offload, or place the rank on a GPU (--device cuda or cuda:N)"));
    CHECK(r.out.find("step") == std::string::npos);  // nothing trained
  }
  const cli_result single = run_cli(gpt_tiny_train(dir / "text.txt", 2, {"--offload", "optimizer"}));
  INFO(single.err);
  CHECK(single.exit_code == 2);
  CHECK(contains(single.err, "rank 0 (stage 0, replica 0) runs on the CPU"));
}

TEST_CASE("train --offload on a GPU ends with the bits of the run without it", "[cli][cuda]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  auto run = [&](const std::vector<std::string>& layout, const char* offload, const std::string& save) {
    std::vector<std::string> more = layout;
    more.insert(more.end(), {"--device", "cuda", "--json", "--save", save, "--offload", offload});
    return run_cli(gpt_tiny_train(dir / "text.txt", 3, more));
  };
  const std::vector<std::string> pipelined{"--eval-windows", "1", "--schedule", "1f1b", "--stages",
                                           "2", "--microbatches", "2"};
  const std::vector<std::string> single{"--eval-windows", "1"};  // --schedule none: the trainer
  for (const auto* layout : {&pipelined, &single})
   for (const char* what : {"optimizer", "activations", "optimizer,activations"}) {
    if (layout == &single && std::string(what) != "optimizer") continue;  // refused: see below
    INFO((layout == &single ? "--schedule none" : "1f1b") << ", --offload " << what);
    const cli_result on_gpu = run(*layout, "none", dir / "gpu.safetensors");
    const cli_result off = run(*layout, what, dir / "off.safetensors");
    INFO(on_gpu.err << off.err);
    if (pipeworks::find_gpus().count == 0) {  // no GPU here: the plan is accepted, the GPU is not
      CHECK(off.exit_code == 1);
      CHECK(contains(off.err, "cannot be used"));
      continue;
    }
    REQUIRE(on_gpu.exit_code == 0);
    REQUIRE(off.exit_code == 0);
    const std::string a = read_file(dir / "gpu.safetensors"), b = read_file(dir / "off.safetensors");
    REQUIRE(!a.empty());
    CHECK(a == b);
    CHECK(last_json(on_gpu)["final_loss"] == last_json(off)["final_loss"]);
    // The moments, or stashes, left the GPU: its peak is lower. 1F1B's stage 0 holds both
    // microbatches' stashes at once, stage 1 one at a time, which has nowhere to wait but the GPU.
    const bool moments = std::string(what) != "activations";
    if (layout == &pipelined)
      for (std::size_t s = 0; s < 2; ++s) {
        INFO("stage " << s);
        const json x = last_json(on_gpu)["stages"][s], y = last_json(off)["stages"][s];
        CHECK(y["optimizer_bytes"] == x["optimizer_bytes"]);
        CHECK(y["peak_activation_bytes"] == x["peak_activation_bytes"]);
        const auto before = x["device_peak_bytes"].get<std::int64_t>();
        const auto after = y["device_peak_bytes"].get<std::int64_t>();
        if (s == 0 || moments) CHECK(after < before);
        else CHECK(after <= before);
      }
  }
}

TEST_CASE("train --offload refuses a bad list naming the flag", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* bad : {"moments", "optimizer,optimizer", "all", ""}) {
    const cli_result r = run_cli(gpt_args(dir, {"--offload", bad}));
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--offload"));
  }
}

TEST_CASE("a plan file carries runtime.offload and is refused with it on CPU ranks", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string plan = dir / "plan.json";
  const cli_result printed = run_cli(gpt_args(dir, {"--print-plan", plan}));
  INFO(printed.err);
  REQUIRE(printed.exit_code == 0);
  json j = json::parse(read_file(plan));
  CHECK(j["runtime"]["offload"] == "none");
  j["runtime"]["offload"] = "activations";
  write_file(plan, j.dump());
  const cli_result r = run_cli({"train", "--plan", plan});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "is activations, but rank 0 (stage 0, replica 0) runs on the CPU"));
  j["runtime"].erase("offload");  // a plan written before the field: no offload
  write_file(plan, j.dump());
  const cli_result old = run_cli({"train", "--plan", plan, "--sample", "0"});
  INFO(old.err);
  CHECK(old.exit_code == 0);
}

TEST_CASE("train --offload activations without a pipeline schedule exits 2 naming why", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  // Refused by the plan's check, before any GPU is opened: the same with a GPU or without.
  const cli_result r = run_cli(gpt_tiny_train(dir / "text.txt", 2, {"--device", "cuda", "--offload",
                                                                   "activations"}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--offload: is activations, but with --schedule none"));
  CHECK(contains(r.err, "no stash waits to be moved"));
}
