// `pipeworks train --zero 1|2`: sharding the optimizer state (and the reduced gradient) over the
// replicas ends with the weights of --zero 0, bit for bit, in one process and over worker
// processes; each replica holds a share of the moments; a checkpoint resumes its shards; --zero
// without replicas, and a resume under another --zero, exit 2 naming the flag.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

std::vector<std::string> zero_args(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "2", "--json"});
  return gpt_tiny_train(dir / "text.txt", 4, std::move(more));
}


struct zero_case {
  const char* kind;
  int replicas;
  const char* microbatches;
};

}  // namespace

TEST_CASE("train --zero 1 and 2 end with the bits of --zero 0 and hold a share of the moments", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  // A flush schedule (global clipping), two asynchronous ones (each stage clips alone), w = 2, 4.
  for (const zero_case& c : {zero_case{"1f1b", 2, "4"}, zero_case{"2bw", 2, "4"},
                             zero_case{"cyclic", 2, "4"}, zero_case{"1f1b", 4, "2"}}) {
    INFO(c.kind << ", w = " << c.replicas);
    std::vector<std::string> files;
    std::vector<json> reports;
    for (const char* zero : {"0", "1", "2"}) {
      const std::string file = dir / (std::string(c.kind) + zero + ".safetensors");
      const cli_result r = run_cli(zero_args(dir, {"--schedule", c.kind, "--stages", "2",
                                                   "--replicas", std::to_string(c.replicas),
                                                   "--microbatches", c.microbatches, "--zero", zero,
                                                   "--save", file}));
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      files.push_back(read_file(file));
      reports.push_back(last_json(r));
    }
    REQUIRE(!files[0].empty());
    CHECK(files[0] == files[1]);
    CHECK(files[0] == files[2]);
    CHECK(reports[0]["final_loss"] == reports[1]["final_loss"]);
    CHECK(reports[0]["final_loss"] == reports[2]["final_loss"]);
    // The largest replica's share of each stage's moments: at least 1/w of the whole (whole
    // tensors are shared out), and less than the whole.
    for (std::size_t s = 0; s < 2; ++s) {
      const auto whole = reports[0]["stages"][s]["optimizer_bytes"].get<std::int64_t>();
      REQUIRE(whole > 0);
      for (std::size_t z = 1; z < 3; ++z) {
        const auto share = reports[z]["stages"][s]["optimizer_bytes"].get<std::int64_t>();
        CHECK(share < whole);
        CHECK(share * c.replicas >= whole);
      }
    }
  }
}

TEST_CASE("train --zero over two worker processes ends with the bits of one process", "[cli][workers]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  worker_cli a, b;
  for (int w : {2, 4}) {
    INFO("w = " << w);
    const std::vector<std::string> shape{"--schedule", "1f1b", "--stages", "2", "--replicas",
                                         std::to_string(w), "--microbatches", w == 2 ? "4" : "2"};
    auto with = [&](std::vector<std::string> more) {
      std::vector<std::string> all = shape;
      all.insert(all.end(), more.begin(), more.end());
      return zero_args(dir, all);
    };
    const std::string local = dir / ("local" + std::to_string(w) + ".safetensors");
    const cli_result one = run_cli(with({"--save", local}));
    INFO(one.err);
    REQUIRE(one.exit_code == 0);
    for (const char* zero : {"1", "2"}) {
      INFO("--zero " << zero);
      const std::string file = dir / ("workers" + std::to_string(w) + zero + ".safetensors");
      const cli_result r = run_cli(with({"--zero", zero, "--workers", a.address() + "," + b.address(),
                                         "--save", file}));
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(read_file(file) == read_file(local));
    }
  }
}

TEST_CASE("train --zero over workers where some replicas own no tensor ends with the same bits", "[cli][workers]") {
  // mlp on 2 stages: the last holds one linear layer, two tensors, among 4 replicas.
  scratch_dir dir;
  worker_cli a, b;
  const std::vector<std::string> run{"train", "--model", "mlp", "--data", fashion_mnist_dir,
                                     "--steps", "3", "--batch", "32", "--schedule", "1f1b",
                                     "--stages", "2", "--replicas", "4", "--microbatches", "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = run;
    all.insert(all.end(), more.begin(), more.end());
    return all;
  };
  const std::string local = dir / "local.safetensors";
  run_ok(with({"--save", local}));
  for (const char* zero : {"1", "2"}) {
    INFO("--zero " << zero);
    const std::string file = dir / (std::string("workers") + zero + ".safetensors");
    run_ok(with({"--zero", zero, "--workers", a.address() + "," + b.address(), "--save", file}));
    CHECK(read_file(file) == read_file(local));
  }
}

TEST_CASE("a --zero 2 checkpoint resumes its shards bit for bit", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::string> shape{"--schedule", "1f1b", "--stages", "2", "--replicas", "2",
                                       "--microbatches", "4", "--zero", "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = shape;
    all.insert(all.end(), more.begin(), more.end());
    return zero_args(dir, all);
  };
  const std::string whole = dir / "whole.safetensors";
  const cli_result w = run_cli(with({"--save", whole}));
  INFO(w.err);
  REQUIRE(w.exit_code == 0);
  const std::string ckpt = dir / "ck";
  const cli_result saved = run_cli(with({"--save-every", "2", "--checkpoint-dir", ckpt}));
  INFO(saved.err);
  REQUIRE(saved.exit_code == 0);
  REQUIRE(has_manifest(ckpt, 2));
  check_resumes_to(ckpt, whole);
  // The shards are the checkpoint's layout: another --zero is refused, naming the flag.
  const cli_result other = run_cli({"train", "--resume", ckpt, "--zero", "1", "--sample", "0"});
  INFO(other.err);
  CHECK(other.exit_code == 2);
  CHECK(contains(other.err, "--zero"));
  CHECK(contains(other.err, "reshard"));
}

TEST_CASE("train --zero without replicas or out of range exits 2 naming it", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const cli_result one = run_cli(zero_args(dir, {"--schedule", "1f1b", "--stages", "2", "--zero", "1"}));
  INFO(one.err);
  CHECK(one.exit_code == 2);
  CHECK(contains(one.err, "--zero"));
  CHECK(contains(one.err, "--replicas"));
  const cli_result three = run_cli(zero_args(dir, {"--schedule", "1f1b", "--stages", "2",
                                                   "--replicas", "2", "--zero", "3"}));
  INFO(three.err);
  CHECK(three.exit_code == 2);
  CHECK(contains(three.err, "--zero"));
  // One device has no replicas to shard over either.
  const cli_result none = run_cli(zero_args(dir, {"--schedule", "none", "--zero", "2"}));
  INFO(none.err);
  CHECK(none.exit_code == 2);
  CHECK(contains(none.err, "--zero"));
  CHECK(contains(none.err, "--replicas"));
}
