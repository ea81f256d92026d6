// `pipeworks checkpoint export DIR --out FILE`: the whole model of a pipelined checkpoint in one
// safetensors file, each tensor the bits of the latest weights in its rank file, loadable by
// --init; a damaged rank file, a missing step and an output inside the checkpoint directory are
// refused, naming what, and nothing is written; a ZeRO checkpoint exports the unsharded model.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "fixtures.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "run_cli.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;

namespace {

// gpt-tiny over 2 stages of 2BW (two weight versions on each stage), checkpoints every 3 steps.
std::string pipelined_checkpoints(const scratch_dir& dir) {
  write_file(dir / "text.txt", small_text());
  const std::string ck = dir / "ck";
  const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                "--schedule", "2bw", "--stages", "2", "--microbatches", "2",
                                "--steps", "7", "--batch", "4", "--save-every", "3",
                                "--checkpoint-dir", ck, "--sample", "0", "--eval-windows", "1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(has_manifest(ck, 6));
  return ck;
}

safetensors_file read(const std::string& path) {
  auto f = read_safetensors(path);
  INFO((f.ok() ? std::string() : f.message()));
  REQUIRE(f.ok());
  return std::move(*f);
}

}  // namespace

TEST_CASE("checkpoint export writes every stage's latest weights under the model's names", "[cli]") {
  scratch_dir dir;
  const std::string ck = pipelined_checkpoints(dir);
  const std::string out = dir / "model.safetensors";
  const cli_result r = run_cli({"checkpoint", "export", ck, "--step", "3", "--out", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "step 3"));
  const safetensors_file exported = read(out);
  CHECK(exported.metadata.at("pipeworks.steps") == "3");
  CHECK(exported.find("transformer.h.0.attn.c_attn.weight") != nullptr);
  CHECK(exported.find("transformer.wte.weight") != nullptr);  // stage 0's
  CHECK(exported.find("lm_head.weight") != nullptr);          // stage 1's
  // Each tensor is the rank file's latest weights (its plain name), bit for bit, and every
  // model tensor of both stages is there.
  std::size_t matched = 0;
  for (const char* rank : {"rank-0.safetensors", "rank-1.safetensors"}) {
    const safetensors_file file = read((std::filesystem::path(ck) / "step-00000003" / rank).string());
    for (const safetensors_info& t : file.tensors) {
      if (t.name.starts_with("pipeworks.")) continue;
      INFO(t.name);
      const safetensors_info* e = exported.find(t.name);
      REQUIRE(e != nullptr);
      const auto a = file.bytes_of(t), b = exported.bytes_of(*e);
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
      ++matched;
    }
  }
  CHECK(matched == exported.tensors.size());
  // The newest checkpoint by default, and the file starts a new run.
  const std::string newest = dir / "newest.safetensors";
  const cli_result latest = run_cli({"checkpoint", "export", ck, "--out", newest});
  INFO(latest.err);
  REQUIRE(latest.exit_code == 0);
  CHECK(read(newest).metadata.at("pipeworks.steps") == "6");
  const cli_result init = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                   "--steps", "1", "--batch", "4", "--init", newest, "--sample",
                                   "0", "--eval-windows", "1"});
  INFO(init.err);
  CHECK(init.exit_code == 0);
}

TEST_CASE("checkpoint export refuses a damaged file, a missing step and an output inside", "[cli]") {
  scratch_dir dir;
  const std::string ck = pipelined_checkpoints(dir);
  const std::string out = dir / "model.safetensors";
  const cli_result missing = run_cli({"checkpoint", "export", ck, "--step", "4", "--out", out});
  CHECK(missing.exit_code == 1);
  CHECK(contains(missing.err, "step 4"));
  const cli_result inside = run_cli({"checkpoint", "export", ck, "--out", ck + "/model.safetensors"});
  CHECK(inside.exit_code == 2);
  CHECK(contains(inside.err, "--out"));
  // A flipped byte in a rank file of step 3: named, and nothing written.
  const std::string rank1 = (std::filesystem::path(ck) / "step-00000003" / "rank-1.safetensors").string();
  std::string bytes = read_file(rank1);
  bytes[bytes.size() - 5] ^= 0x40;
  write_file(rank1, bytes);
  const cli_result damaged = run_cli({"checkpoint", "export", ck, "--step", "3", "--out", out});
  INFO(damaged.err);
  CHECK(damaged.exit_code == 1);
  CHECK(contains(damaged.err, "rank-1.safetensors"));
  CHECK(!std::filesystem::exists(out));
  CHECK(!std::filesystem::exists(std::filesystem::path(ck) / "model.safetensors"));
}

TEST_CASE("checkpoint export of a ZeRO checkpoint writes the model of the unsharded one", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  // The same run unsharded and under ZeRO 1 and 2 (each replica keeps only its tensors' moments,
  // the weights are whole on every replica): the same tensors, bit for bit, and the same
  // metadata but the directory each came from.
  std::vector<safetensors_file> exported;
  for (const char* zero : {"0", "1", "2"}) {
    const std::string ck = dir / (std::string("ck") + zero), out = ck + ".safetensors";
    const cli_result r = run_cli({"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                  "--schedule", "1f1b", "--stages", "2", "--replicas", "2",
                                  "--microbatches", "2", "--zero", zero, "--steps", "4", "--batch",
                                  "8", "--save-every", "2", "--checkpoint-dir", ck, "--sample",
                                  "0", "--eval-windows", "1"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const cli_result e = run_cli({"checkpoint", "export", ck, "--step", "2", "--out", out});
    INFO(e.err);
    REQUIRE(e.exit_code == 0);
    exported.push_back(read(out));
  }
  const safetensors_file& want = exported[0];
  REQUIRE(!want.tensors.empty());
  for (std::size_t z = 1; z < exported.size(); ++z) {
    INFO("--zero " << z);
    const safetensors_file& got = exported[z];
    REQUIRE(got.tensors.size() == want.tensors.size());
    for (std::size_t i = 0; i < want.tensors.size(); ++i) {
      INFO(want.tensors[i].name);
      CHECK(got.tensors[i].name == want.tensors[i].name);
      CHECK(got.tensors[i].shape == want.tensors[i].shape);
      const auto a = got.bytes_of(got.tensors[i]), b = want.bytes_of(want.tensors[i]);
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
    }
    auto meta = got.metadata, want_meta = want.metadata;
    meta.erase("pipeworks.exported_from");
    want_meta.erase("pipeworks.exported_from");
    CHECK(meta == want_meta);
  }
}

TEST_CASE("export refuses to write over the data its checkpoint's run trained on", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string ck = pipelined_checkpoints(dir);
  const cli_result r = run_cli({"checkpoint", "export", ck, "--out", dir / "text.txt"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--out"));
  CHECK(contains(r.err, "the data the checkpoint's run trained on"));
  CHECK(read_file(dir / "text.txt") == small_text());
}
