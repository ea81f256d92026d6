// End-to-end tests of `pipeworks train` (cli/cmd_train.cpp): JSON metrics for tiny mlp and gpt
// runs, checkpoints with Hugging Face names, custom model files, and errors naming flags and paths.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

// The JSON header of a safetensors file: 8 bytes of little-endian length, then that much JSON.
json safetensors_header(const std::string& path) {
  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  REQUIRE(8 + n <= bytes.size());
  json header = json::parse(bytes.substr(8, n), nullptr, false);
  REQUIRE_FALSE(header.is_discarded());
  return header;
}

}  // namespace

TEST_CASE("train mlp --json: one JSON object per line, the last with the summary", "[cli]") {
  const cli_result r = run_cli({"train", "--model", "mlp", "--data", fashion_mnist_dir, "--steps", "20",
                                "--batch", "32", "--json"});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const auto lines = json_lines(r);
  REQUIRE(lines.size() >= 2);
  const json& last = lines.back();
  REQUIRE(last.contains("final_loss"));
  REQUIRE(last.contains("steps"));
  REQUIRE(last.contains("samples_per_s"));
  REQUIRE(last.contains("test_accuracy"));
  CHECK(last["steps"].get<int>() == 20);
  CHECK(std::isfinite(last["final_loss"].get<double>()));
  CHECK(last["final_loss"].get<double>() < std::log(10.0));  // below a uniform guess over 10 classes
  CHECK(last["samples_per_s"].get<double>() > 0);
  const double accuracy = last["test_accuracy"].get<double>();
  CHECK(accuracy > 0.2);  // chance is 0.1; 20 steps of batch 32 get well past it
  CHECK(accuracy <= 1.0);
  // The progress lines before it carry the step and its loss.
  REQUIRE(lines.front().contains("step"));
  REQUIRE(lines.front().contains("loss"));
  CHECK(lines.front()["step"].get<int>() == 1);
}

TEST_CASE("train: a missing data path names the path (and for Fashion-MNIST the package)", "[cli]") {
  const cli_result mlp = run_cli({"train", "--model", "mlp", "--data", "/nonexistent", "--steps", "2"});
  INFO(mlp.err);
  CHECK(mlp.exit_code == 1);
  CHECK(contains(mlp.err, "/nonexistent"));
  CHECK(contains(mlp.err, "dataset-fashion-mnist"));

  const cli_result gpt = run_cli({"train", "--model", "gpt-tiny", "--data", "/nonexistent/text.txt", "--steps", "2"});
  INFO(gpt.err);
  CHECK(gpt.exit_code == 1);
  CHECK(contains(gpt.err, "/nonexistent/text.txt"));
}

TEST_CASE("train gpt-tiny --save writes a safetensors checkpoint with GPT-2 names", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const json last = train_checkpoint("gpt-tiny", dir / "text.txt", dir / "ckpt.safetensors");
  for (const char* key : {"final_loss", "steps", "samples_per_s"}) {
    INFO(key);
    CHECK(last.contains(key));
  }
  CHECK(last["steps"].get<int>() == 5);
  CHECK(last["final_loss"].get<double>() < std::log(256.0) + 0.5);
  // The temporary file (a hidden ".ckpt.safetensors.tmp.PID.N" sibling) is renamed away.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"ckpt.safetensors", "text.txt"});
  const json header = safetensors_header(dir / "ckpt.safetensors");
  CHECK(header.at("transformer.wte.weight").at("shape") == json::array({256, 64}));
  CHECK(header.at("transformer.wpe.weight").at("shape") == json::array({64, 64}));
  CHECK(header.at("transformer.h.1.attn.c_attn.weight").at("shape") == json::array({64, 192}));
  CHECK(header.at("lm_head.weight").at("shape") == json::array({256, 64}));
  CHECK(header.at("lm_head.weight").at("dtype") == "F32");
  CHECK_FALSE(header.contains("lm_head.bias"));
  CHECK_FALSE(header.contains("transformer.h.2.ln_1.weight"));  // gpt-tiny has 2 layers
}

TEST_CASE("train --model FILE.json trains a custom GPT of that shape", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "model.json", custom_gpt_json);
  const json last = train_checkpoint(dir / "model.json", dir / "text.txt", dir / "custom.safetensors", 3);
  CHECK(last["steps"].get<int>() == 3);
  CHECK(std::isfinite(last["final_loss"].get<double>()));
  const json header = safetensors_header(dir / "custom.safetensors");
  CHECK(header.at("transformer.wpe.weight").at("shape") == json::array({16, 32}));
  CHECK(header.at("transformer.h.0.mlp.c_fc.weight").at("shape") == json::array({32, 128}));
  CHECK_FALSE(header.contains("transformer.h.1.ln_1.weight"));
}

TEST_CASE("train without --json ends with the final loss, a sample and where the outputs went", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string ckpt = dir / "out.safetensors";
  const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "text.txt", "--steps", "2",
                                "--batch", "2", "--eval-windows", "2", "--sample", "20", "--save", ckpt});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "final loss"));
  CHECK(contains(r.out, "sample"));
  CHECK(contains(r.out, ckpt));
}

TEST_CASE("train: bad values exit 2 with a message naming the flag", "[cli]") {
  scratch_dir dir;
  write_file(dir / "broken.json", R"({"type": "gpt", "context": )");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--model", "mlp", "--steps", "0"}, "--steps"},
      {{"--model", "mlp", "--steps", "ten"}, "--steps"},
      {{"--model", "mlp", "--batch", "x"}, "--batch"},
      {{"--model", "mlp", "--batch", "-4"}, "--batch"},
      {{"--model", "mlp", "--lr", "abc"}, "--lr"},
      {{"--model", "mlp", "--threads", "-1"}, "--threads"},
      {{"--model", "mlp", "--threads", "-1"}, "must be a whole number in 0..4096 (0: all cores), got '-1'"},
      {{"--model", "mlp", "--clip", "-0.5"}, "must be a non-negative number, got '-0.5'"},
      {{"--model", "mlp", "--optimizer", "nope"}, "--optimizer"},
      {{"--model", "nope"}, "--model"},
      {{"--model", "/nonexistent-pipeworks-model.json"}, "/nonexistent-pipeworks-model.json"},
      {{"--model", dir / "broken.json"}, "--model"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args{"train"};
    args.insert(args.end(), flags.begin(), flags.end());
    const cli_result r = run_cli(args);
    INFO(named << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, named));
  }
}

TEST_CASE("train: huge, infinite and unwritable values exit 2 before training", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "wrap.json", R"({"type": "mlp", "hidden": [4294967297]})");
  write_file(dir / "huge.json", R"({"type": "gpt", "width": 1048576, "layers": 1048576})");
  std::filesystem::create_directories(dir / "sub");
  const std::string text = dir / "text.txt";
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases{
      {{"--batch", "1000000000"}, {"--batch", "memory", "--microbatches"}},
      {{"--batch", "1000000000", "--microbatches", "1000000000"}, {"--batch", "memory"}},
      {{"--lr", "inf"}, {"--lr", "finite", "'inf'"}},
      {{"--clip", "inf"}, {"--clip", "finite"}},
      {{"--sample", "1000000000"}, {"--sample", "100000"}},
      {{"--steps", "1e12"}, {"--steps", "integer", "'1e12'"}},
      {{"--save", dir / "missing/x.safetensors"}, {"--save", "does not exist", "mkdir -p"}},
      {{"--save", "/proc/pipeworks.safetensors"}, {"--save", "cannot create files in /proc"}},
      {{"--save", dir / "sub"}, {"--save", "is a directory"}},
      {{"--metrics", dir / "missing/m.jsonl"}, {"--metrics", "does not exist"}},
      {{"--model", dir / "wrap.json"}, {"--model", "4294967297"}},
      {{"--model", dir / "huge.json"}, {"--model", "parameters"}},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args{"train", "--data", text, "--steps", "2"};
    args.insert(args.end(), flags.begin(), flags.end());
    if (flags.front() != "--model") args.insert(args.end(), {"--model", "gpt-tiny"});
    const cli_result r = run_cli(args);
    INFO(flags.front() << " " << flags.back() << ": exit " << r.exit_code << ", " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("step") == std::string::npos);  // refused before any training
    for (const auto& word : named) CHECK(contains(r.err, word));
  }
  CHECK_FALSE(std::filesystem::exists(dir / "missing"));
  CHECK(std::filesystem::is_empty(dir / "sub"));
}

TEST_CASE("train: weights that the last update made infinite are not saved and the run fails",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  for (const char* schedule : {"none", "1f1b"}) {
    std::vector<std::string> args{"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                  "--steps", "1", "--optimizer", "sgd", "--lr", "1e300",
                                  "--clip", "0", "--eval-windows", "1", "--schedule", schedule,
                                  "--save", dir / "w.safetensors"};
    const cli_result r = run_cli(args);
    INFO(schedule << ": " << r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "the weights after step 1 are not finite"));
    CHECK(contains(r.err, "lower --lr"));
    CHECK_FALSE(std::filesystem::exists(dir / "w.safetensors"));
  }
}
