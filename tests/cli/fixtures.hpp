// Inputs for the train and eval CLI tests: a small deterministic text file, a tiny custom GPT
// config, and a checkpoint made by a few steps of `pipeworks train`.
#pragma once
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "run_cli.hpp"

namespace pipeworks::cli_test {

// `pipeworks simulate --schedule kind --stages p --microbatches m` plus more flags.
inline std::vector<std::string> simulate_args(const std::string& kind, int p, int m,
                                              std::vector<std::string> more = {}) {
  std::vector<std::string> args{"simulate",       "--schedule",      kind,
                                "--stages",       std::to_string(p), "--microbatches",
                                std::to_string(m)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Whether the checkpoint of `step` in `dir` has its manifest (the checkpoint is complete).
inline bool has_manifest(const std::string& dir, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08d", step);
  return std::filesystem::exists(std::filesystem::path(dir) / name / "manifest.json");
}

// Resumes the checkpoints in `ckpt` to the run's end (saving the weights beside it) and requires
// the weights of the uninterrupted run's file `whole`, byte for byte.
inline void check_resumes_to(const std::string& ckpt, const std::string& whole) {
  const std::string resumed = ckpt + "-resumed.safetensors";
  const cli_result r = run_cli({"train", "--resume", ckpt, "--save", resumed, "--sample", "0",
                                "--eval-windows", "2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(resumed) == read_file(whole));
}

inline const std::string fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

// About `bytes` bytes of repetitive English, so a tiny model has something to learn.
inline std::string small_text(std::size_t bytes = 20000) {
  const char* lines[] = {"the quick brown fox jumps over the lazy dog.\n",
                         "a stitch in time saves nine, said the old tailor.\n",
                         "pipelines keep every stage busy when the bubbles are small.\n",
                         "to be or not to be, that is the question.\n"};
  std::string text;
  for (std::size_t i = 0; text.size() < bytes; ++i) text += std::to_string(i % 97) + " " + lines[i % 4];
  text.resize(bytes);
  return text;
}

// A profile of four equal layers, small activations: two devices should take two layers each.
inline const char* four_layers = R"({"model": "toy", "microbatch": 4, "layers": [
  {"name": "a", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000},
  {"name": "b", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000},
  {"name": "c", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000},
  {"name": "d", "fwd_ms": 1, "bwd_ms": 2, "activation_bytes": 1000, "saved_bytes": 1000, "param_bytes": 4000000, "optimizer_bytes": 8000000}]})";
// A cluster of two devices on one server.
inline const char* two_devices = R"({"device_memory_bytes": 1000000000,
  "levels": [{"name": "server", "count": 2, "bandwidth_bytes_per_s": 1e9, "latency_s": 0}]})";

// A GPT smaller than gpt-tiny: context 16, 1 layer, 2 heads, width 32.
inline const std::string custom_gpt_json =
    R"({"type": "gpt", "context": 16, "layers": 1, "heads": 2, "width": 32})";

// Every stdout line of a --json run parsed; fails the test on a line that is not JSON.
inline std::vector<nlohmann::json> json_lines(const cli_result& r) {
  std::vector<nlohmann::json> objects;
  for (const auto& line : nonempty_lines(r.out)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    INFO("not JSON: " << line);
    REQUIRE_FALSE(j.is_discarded());
    objects.push_back(std::move(j));
  }
  return objects;
}

// The last stdout line of a --json run (its summary), parsed.
inline nlohmann::json last_json(const cli_result& r) {
  const std::vector<nlohmann::json> all = json_lines(r);
  REQUIRE_FALSE(all.empty());
  return all.back();
}

// `pipeworks train` of gpt-tiny on `text`, batch 8, `steps` steps, no sample at the end, then
// `more` (the layout, the outputs).
inline std::vector<std::string> gpt_tiny_train(const std::string& text, int steps,
                                               std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--model", "gpt-tiny", "--data", text, "--batch", "8",
                             "--steps", std::to_string(steps), "--sample", "0"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Runs the CLI and requires exit 0, showing its stderr when not.
inline void run_ok(const std::vector<std::string>& args) {
  const cli_result r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

// Trains `model` for a few steps on `text` with --save `checkpoint`; returns the last JSON line.
inline nlohmann::json train_checkpoint(const std::string& model, const std::string& text,
                                       const std::string& checkpoint, int steps = 5) {
  const cli_result r = run_cli({"train", "--model", model, "--data", text, "--steps", std::to_string(steps),
                                "--batch", "4", "--eval-windows", "4", "--sample", "16", "--save", checkpoint,
                                "--json"});
  INFO("train " << model << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const auto lines = json_lines(r);
  REQUIRE_FALSE(lines.empty());
  return lines.back();
}

}  // namespace pipeworks::cli_test
