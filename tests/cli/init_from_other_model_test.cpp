// --init from the weights of another model: refused (exit 2) naming the first tensor that does not
// fit, the file left as it was; --init-partial loads the tensors that fit and lists the rest.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
namespace fs = std::filesystem;

namespace {

// gpt-tiny's shape with four layers instead of two: 53 tensors to gpt-tiny's 29.
const std::string four_layer_json =
    R"({"type": "gpt", "context": 64, "layers": 4, "heads": 2, "width": 64})";

std::vector<std::string> train_from(const std::string& model, const std::string& text,
                                    const std::string& init, std::vector<std::string> more = {}) {
  std::vector<std::string> args{"train", "--model", model, "--data", text, "--steps", "1",
                                "--eval-windows", "1", "--sample", "0", "--init", init};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("init from another model is refused naming the first tensor that does not fit",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "four.json", four_layer_json);
  write_file(dir / "narrow.json", custom_gpt_json);
  train_checkpoint(dir / "four.json", dir / "text.txt", dir / "four.st", 1);
  train_checkpoint("gpt-tiny", dir / "text.txt", dir / "tiny.st", 1);
  train_checkpoint(dir / "narrow.json", dir / "text.txt", dir / "narrow.st", 1);
  const cli_result ck = run_cli({"train", "--model", dir / "four.json", "--data", dir / "text.txt",
                                 "--steps", "2", "--eval-windows", "1", "--sample", "0",
                                 "--schedule", "1f1b", "--stages", "2", "--save-every", "1",
                                 "--checkpoint-dir", dir / "ck4"});
  INFO(ck.err);
  REQUIRE(ck.exit_code == 0);
  const std::string rank1 = dir / "ck4/step-00000001/rank-1.safetensors";
  const std::string rank1_bytes = read_file(rank1);
  const std::string four = read_file(dir / "four.st"), tiny = read_file(dir / "tiny.st");
  struct bad_case {
    std::string model, init, names;
  };
  const std::vector<bad_case> cases{
      // The file holds tensors the model lacks (the issue's 24 of 53 ignored).
      {"gpt-tiny", dir / "four.st",
       "transformer.h.2.ln_1.weight (in " + dir / "four.st" + ") is not a tensor of the model"},
      // The same from a checkpoint directory: its rank file is named.
      {"gpt-tiny", dir / "ck4",
       "transformer.h.2.ln_1.weight (in " + rank1 + ") is not a tensor of the model"},
      // The model has tensors the file lacks.
      {dir / "four.json", dir / "tiny.st",
       "transformer.h.2.ln_1.weight of the model is not in " + dir / "tiny.st"},
      // A tensor of another shape.
      {"gpt-tiny", dir / "narrow.st", "has shape [256, 32] in " + dir / "narrow.st" +
                                          ", the model's is [256, 64]"},
  };
  for (const auto& c : cases) {
    const cli_result r = run_cli(train_from(c.model, dir / "text.txt", c.init,
                                            {"--save", dir / "out.st"}));
    INFO(c.model << " from " << c.init << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--init: " + c.init + " does not fit the model: "));
    CHECK(contains(r.err, c.names));
    CHECK(contains(r.err, "--init-partial"));
    CHECK_FALSE(fs::exists(dir / "out.st"));
  }
  CHECK(read_file(dir / "four.st") == four);
  CHECK(read_file(dir / "tiny.st") == tiny);
  CHECK(read_file(rank1) == rank1_bytes);
}

TEST_CASE("init-partial loads the tensors that fit and lists what it loaded and what it did not",
          "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  write_file(dir / "four.json", four_layer_json);
  train_checkpoint(dir / "four.json", dir / "text.txt", dir / "four.st", 1);
  train_checkpoint("gpt-tiny", dir / "text.txt", dir / "tiny.st", 1);
  const std::string four = read_file(dir / "four.st"), tiny = read_file(dir / "tiny.st");

  const cli_result smaller =
      run_cli(train_from("gpt-tiny", dir / "text.txt", dir / "four.st", {"--init-partial"}));
  INFO(smaller.err);
  CHECK(smaller.exit_code == 0);
  CHECK(contains(smaller.err, "--init-partial loaded 29 of the model's 29 tensors from " +
                                  dir / "four.st" + ": transformer.wte.weight"));
  CHECK(contains(smaller.err, "did not fit: transformer.h.2.ln_1.weight (in"));
  CHECK(contains(smaller.err, "transformer.h.3.mlp.c_proj.bias (in"));

  const cli_result larger =
      run_cli(train_from(dir / "four.json", dir / "text.txt", dir / "tiny.st", {"--init-partial"}));
  INFO(larger.err);
  CHECK(larger.exit_code == 0);
  CHECK(contains(larger.err, "--init-partial loaded 29 of the model's 53 tensors"));
  CHECK(contains(larger.err, "kept the seeded values of 24: transformer.h.2.ln_1.weight"));
  CHECK(read_file(dir / "four.st") == four);
  CHECK(read_file(dir / "tiny.st") == tiny);
}

TEST_CASE("init-partial without --init is refused", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                "--steps", "1", "--init-partial"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--init-partial"));
  CHECK(contains(r.err, "give --init"));
}

TEST_CASE("init from weights holding a NaN is refused naming the tensor", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string saved = dir / "w.safetensors";
  REQUIRE(run_cli(gpt_tiny_train(dir / "text.txt", 1, {"--eval-windows", "1", "--save", saved}))
              .exit_code == 0);
  // The first value after the header becomes a quiet NaN (0x7fc00000, little-endian).
  std::string bytes = read_file(saved);
  REQUIRE(bytes.size() > 16);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[i]);
  REQUIRE(8 + header + 4 <= bytes.size());
  bytes.replace(8 + header, 4, std::string("\x00\x00\xc0\x7f", 4));
  write_file(saved, bytes);
  const cli_result r = run_cli(gpt_tiny_train(dir / "text.txt", 1, {"--init", saved}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--init"));
  CHECK(contains(r.err, "holds NaN or infinite values"));
}
