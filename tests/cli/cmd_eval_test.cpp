// End-to-end tests of `pipeworks eval` (cli/cmd_eval.cpp) on checkpoints written by `train --save`:
// the JSON it prints, the window definition, and clear errors for damaged checkpoints and bad inputs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

cli_result eval(const std::string& model, const std::string& checkpoint, const std::string& text, int windows,
                std::vector<std::string> more = {}) {
  std::vector<std::string> args{"eval",   "--model", model, "--checkpoint", checkpoint, "--text", text,
                                "--windows", std::to_string(windows)};
  args.insert(args.end(), more.begin(), more.end());
  return run_cli(args);
}

// eval --json's loss; fails the test unless it exits 0 and prints exactly {"loss": x, "windows": N}.
double eval_loss(const std::string& model, const std::string& checkpoint, const std::string& text, int windows,
                 std::vector<std::string> more = {}) {
  more.push_back("--json");
  const cli_result r = eval(model, checkpoint, text, windows, more);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  REQUIRE(j.is_object());
  CHECK(j.size() == 2);
  CHECK(j.at("windows").get<int>() == windows);
  return j.at("loss").get<double>();
}

// A tiny gpt-tiny checkpoint and its training text in a scratch folder.
struct trained {
  scratch_dir dir;
  std::string text = dir / "text.txt";
  std::string ckpt = dir / "ckpt.safetensors";
  trained() {
    write_file(text, small_text());
    train_checkpoint("gpt-tiny", text, ckpt);
  }
};

}  // namespace

TEST_CASE("eval --json prints {loss, windows}, and the same loss every time", "[cli]") {
  trained t;
  const double loss = eval_loss("gpt-tiny", t.ckpt, t.text, 8);
  CHECK(std::isfinite(loss));
  CHECK(loss > 0.0);
  CHECK(loss < std::log(256.0) + 1.0);  // 5 steps from a near-uniform start
  CHECK(eval_loss("gpt-tiny", t.ckpt, t.text, 8) == loss);  // save, load, eval: bit-identical
}

TEST_CASE("eval averages the first N non-overlapping windows of ctx+1 bytes from offset 0", "[cli]") {
  // gpt-tiny has context 64: window k is bytes [65k, 65k + 65). Scoring two files that each hold
  // one of the first two windows must average to the loss over N = 2 of the whole text.
  trained t;
  const std::string text = read_file(t.text);
  write_file(t.dir / "w0.txt", text.substr(0, 65));
  write_file(t.dir / "w1.txt", text.substr(65, 65));
  const double both = eval_loss("gpt-tiny", t.ckpt, t.text, 2);
  const double w0 = eval_loss("gpt-tiny", t.ckpt, t.dir / "w0.txt", 1);
  const double w1 = eval_loss("gpt-tiny", t.ckpt, t.dir / "w1.txt", 1);
  CHECK(both == Approx((w0 + w1) / 2).epsilon(1e-5));
  CHECK(w0 != w1);  // the windows differ, so this checks where each one starts
  // The batch size only groups the windows.
  CHECK(eval_loss("gpt-tiny", t.ckpt, t.text, 6, {"--batch", "1"}) ==
        Approx(eval_loss("gpt-tiny", t.ckpt, t.text, 6, {"--batch", "4"})).epsilon(1e-5));
}

TEST_CASE("eval of a custom GPT checkpoint with the same FILE.json works", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "model.json", custom_gpt_json);
  train_checkpoint(dir / "model.json", dir / "text.txt", dir / "custom.safetensors", 3);
  const double loss = eval_loss(dir / "model.json", dir / "custom.safetensors", dir / "text.txt", 4);
  CHECK(std::isfinite(loss));
  // The same file under gpt-tiny's shapes is rejected, naming a tensor and the shapes.
  const cli_result wrong = eval("gpt-tiny", dir / "custom.safetensors", dir / "text.txt", 4);
  INFO(wrong.err);
  CHECK(wrong.exit_code == 1);  // a run failure, not a bad flag
  CHECK(contains(wrong.err, "transformer."));
  CHECK(contains(wrong.err, "[256, 32]"));
  CHECK(contains(wrong.err, "[256, 64]"));
}

TEST_CASE("eval of a truncated checkpoint fails naming the byte offset or the tensor", "[cli]") {
  trained t;
  const std::string full = read_file(t.ckpt);
  REQUIRE(full.size() > 2000);
  for (std::size_t keep : {std::size_t{0}, std::size_t{4}, std::size_t{100}, full.size() / 2, full.size() - 10}) {
    const std::string cut = t.dir / ("cut-" + std::to_string(keep) + ".safetensors");
    write_file(cut, full.substr(0, keep));
    const cli_result r = eval("gpt-tiny", cut, t.text, 2);
    INFO("kept " << keep << " of " << full.size() << " bytes: " << r.err);
    CHECK(r.exit_code == 1);  // a run failure, not a bad flag
    CHECK(r.out.empty());
    CHECK(contains(r.err, cut));
    CHECK((contains(r.err, "byte") || contains(r.err, "transformer.") || contains(r.err, "lm_head")));
  }
  // Cut inside the last tensor's data: the message names that tensor.
  const std::string cut = t.dir / "cut-tail.safetensors";
  write_file(cut, full.substr(0, full.size() - 10));
  const cli_result tail = eval("gpt-tiny", cut, t.text, 2);
  INFO(tail.err);
  CHECK(contains(tail.err, "lm_head.weight"));
}

TEST_CASE("eval of a checkpoint with a bad header fails with a message", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  std::string bad("\x05\0\0\0\0\0\0\0{{{{{", 13);
  write_file(dir / "bad.safetensors", bad);
  const cli_result r = eval("gpt-tiny", dir / "bad.safetensors", dir / "text.txt", 1);
  INFO(r.err);
  CHECK(r.exit_code == 1);  // a run failure, not a bad flag
  CHECK(contains(r.err, dir / "bad.safetensors"));
  CHECK(contains(r.err, "header"));
}

TEST_CASE("eval: missing files and too many windows name what is wrong", "[cli]") {
  trained t;
  const cli_result no_ckpt = eval("gpt-tiny", "/nonexistent-pipeworks.safetensors", t.text, 1);
  INFO(no_ckpt.err);
  CHECK(no_ckpt.exit_code == 1);  // a run failure, not a bad flag
  CHECK(contains(no_ckpt.err, "/nonexistent-pipeworks.safetensors"));

  const cli_result no_text = eval("gpt-tiny", t.ckpt, "/nonexistent-pipeworks.txt", 1);
  INFO(no_text.err);
  CHECK(no_text.exit_code == 1);  // a run failure, not a bad flag
  CHECK(contains(no_text.err, "/nonexistent-pipeworks.txt"));

  const cli_result too_many = eval("gpt-tiny", t.ckpt, t.text, 100000);
  INFO(too_many.err);
  CHECK(too_many.exit_code == 2);  // a bad --windows value
  CHECK(contains(too_many.err, "100000"));
}

TEST_CASE("eval: bad values exit 2 with a message naming the flag", "[cli]") {
  trained t;
  const std::vector<std::pair<cli_result, std::string>> cases{
      {eval("gpt-tiny", t.ckpt, t.text, 0), "--windows"},
      {run_cli({"eval", "--model", "gpt-tiny", "--checkpoint", t.ckpt, "--text", t.text, "--windows", "two"}),
       "--windows"},
      {eval("mlp", t.ckpt, t.text, 1), "--model"},
      {eval("nope", t.ckpt, t.text, 1), "--model"},
      {eval("gpt-tiny", t.ckpt, t.text, 1, {"--batch", "0"}), "--batch"},
      {eval("gpt-tiny", t.ckpt, t.text, 1, {"--batch", "0"}), "must be a positive integer, got '0'"},
      {eval("gpt-tiny", t.ckpt, t.text, 1, {"--threads", "-1"}), "--threads"},
      {run_cli({"eval", "--model", "gpt-tiny", "--text", t.text, "--windows", "1"}), "--checkpoint"},
  };
  for (const auto& [r, flag] : cases) {
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag));
  }
}

TEST_CASE("eval: a directory as --checkpoint and a model too big for memory fail cleanly",
          "[cli]") {
  trained t;
  const cli_result dir = eval("gpt-tiny", t.dir.path().string(), t.text, 1);
  INFO(dir.err);
  CHECK(dir.exit_code == 1);
  CHECK(contains(dir.err, "is a directory"));
  CHECK_FALSE(contains(dir.err, "bad_alloc"));
  // Attention saves context^2 x heads scores per sample: 2^32 x 64 x 4 bytes is a terabyte.
  write_file(t.dir / "wide.json", R"({"type": "gpt", "context": 65536, "layers": 2, "heads": 64, "width": 64})");
  const cli_result big = eval(t.dir / "wide.json", t.ckpt, t.text, 1);
  INFO(big.err);
  CHECK(big.exit_code == 2);
  // One window is already too much: a smaller --batch cannot help, a smaller model can.
  CHECK(contains(big.err, "--model"));
  CHECK(contains(big.err, "even one sample needs"));
  CHECK(contains(big.err, "choose a smaller model"));
  CHECK(contains(big.err, "memory"));
}

TEST_CASE("eval of weights holding NaN fails naming the tensor instead of printing a null loss",
          "[cli]") {
  trained t;
  std::string bytes = read_file(t.ckpt);
  REQUIRE(bytes.size() > 16);
  const char nan_f32[] = {'\x00', '\x00', '\xc0', '\x7f'};  // a quiet NaN, little-endian
  bytes.replace(bytes.size() - 4, 4, nan_f32, 4);             // the last value of the last tensor
  const std::string bad = t.dir / "nan.safetensors";
  write_file(bad, bytes);
  const cli_result r = eval("gpt-tiny", bad, t.text, 2, {"--json"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(contains(r.err, bad));
  CHECK(contains(r.err, "NaN or infinite"));
  CHECK((contains(r.err, "transformer.") || contains(r.err, "lm_head")));
}
