// `pipeworks checkpoint reshard --zero N`: ZeRO checkpoints (each replica's rank file holds the
// moments of the tensors it owns) re-cut for other stages, schedules, replicas and ZeRO stages
// write the shards a run under the new layout writes, and resume bit for bit.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "run_cli.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

// gpt-tiny, batch 8, 8 steps; the layout's flags follow.
std::vector<std::string> gpt(const scratch_dir& dir, std::vector<std::string> more) {
  more.insert(more.begin(), {"--eval-windows", "1"});
  return gpt_tiny_train(dir / "text.txt", 8, std::move(more));
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}


// Re-cuts `from` into `to` with the layout options.
void reshard(const std::string& from, const std::string& to, std::vector<std::string> layout) {
  run_ok(with({"checkpoint", "reshard", from, "--out", to}, layout));
}

// Resumes `ck` to the end and returns the bytes of its --save file.
std::string resume(const scratch_dir& dir, const std::string& ck) {
  const std::string save = dir / (std::filesystem::path(ck).filename().string() + ".safetensors");
  run_ok({"train", "--resume", ck, "--save", save});
  return read_file(save);
}

safetensors_file read_st(const std::string& path) {
  auto f = read_safetensors(path);
  INFO((f.ok() ? std::string() : f.message()));
  REQUIRE(f.ok());
  return std::move(*f);
}

std::string rank_file(const std::string& ck, int step, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08d", step);
  return (std::filesystem::path(ck) / name / ("rank-" + std::to_string(rank) + ".safetensors")).string();
}

// The rank's state as its file records it, less the credits (a re-cut starts every link's window
// whole, a run records those of messages it has yet to send).
json rank_state_of(const safetensors_file& f) {
  json j = json::parse(f.metadata.at("pipeworks.rank_state"));
  j.erase("credits");
  return j;
}

// Rank r's file of the re-cut `got` against the file a run wrote (`want`): the same tensors
// (weights, each moment present or absent) with the same bits, the same identity and the same
// state (update counts, which moments are kept, program position), credits aside.
void same_rank_file(const std::string& got, const std::string& want) {
  INFO(got << " against " << want);
  const safetensors_file a = read_st(got), b = read_st(want);
  CHECK(rank_state_of(a) == rank_state_of(b));
  for (const auto& [key, value] : b.metadata)
    if (key != "pipeworks.rank_state") CHECK(a.metadata.at(key) == value);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const safetensors_info& t : b.tensors) {
    INFO(t.name);
    const safetensors_info* o = a.find(t.name);
    REQUIRE(o != nullptr);
    const auto x = a.bytes_of(*o), y = b.bytes_of(t);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size()) == 0);
  }
}

// For each virtual stage of a checkpoint of `ranks` ranks over `stages` devices: which replicas
// keep each tensor's moments (the first moment's flag), as counts per tensor.
std::map<int, std::vector<int>> keepers(const std::string& ck, int step, int ranks) {
  std::map<int, std::vector<int>> out;
  for (int r = 0; r < ranks; ++r) {
    const json st = rank_state_of(read_st(rank_file(ck, step, r)));
    for (const json& s : st.at("stages")) {
      const auto has = s.at("moment1").get<std::vector<bool>>();
      const auto updates = s.at("updates").get<std::vector<std::int64_t>>();
      auto& count = out[s.at("stage").get<int>()];
      count.resize(has.size(), 0);
      for (std::size_t e = 0; e < has.size(); ++e) {
        CHECK(updates[e] == (has[e] ? step : 0));  // an owner's count, or none kept
        count[e] += has[e] ? 1 : 0;
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a 1F1B checkpoint of 4 stages resumes as 2 stages, as none and as 2 replicas under zero 2", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::string whole = dir / "whole.safetensors", ck = dir / "ck";
  // The flush schedules add a step's microbatch gradients in none's order (m = 4 everywhere).
  run_ok(gpt(dir, {"--microbatches", "4", "--save", whole}));
  run_ok(gpt(dir, {"--schedule", "1f1b", "--stages", "4", "--microbatches", "4", "--save-every",
                   "4", "--checkpoint-dir", ck}));
  REQUIRE(has_manifest(ck, 4));
  const std::string want = read_file(whole);
  REQUIRE(!want.empty());
  reshard(ck, dir / "p2", {"--stages", "2"});
  CHECK(resume(dir, dir / "p2") == want);
  reshard(ck, dir / "none", {"--schedule", "none"});
  CHECK(resume(dir, dir / "none") == want);
  // Two replicas of 2 microbatches under ZeRO 2: each replica keeps its own tensors' moments.
  reshard(ck, dir / "z2", {"--replicas", "2", "--microbatches", "2", "--zero", "2"});
  for (const auto& [stage, count] : keepers(dir / "z2", 4, 8)) {
    INFO("stage " << stage);
    for (int c : count) CHECK(c == 1);
  }
  // Two replicas sum their gradients after each replica's own sum, not in none's order, so the
  // steps after the cut are not none's bits; they are those of the same re-cut unsharded, and
  // the shards cut back to none before a step resume to none's bits.
  reshard(ck, dir / "z0", {"--replicas", "2", "--microbatches", "2", "--zero", "0"});
  const std::string sharded = resume(dir, dir / "z2");
  REQUIRE(!sharded.empty());
  CHECK(sharded == resume(dir, dir / "z0"));
  reshard(dir / "z2", dir / "z2-none", {"--schedule", "none", "--microbatches", "4"});
  CHECK(resume(dir, dir / "z2-none") == want);
}

TEST_CASE("a zero 1 checkpoint re-cut under another ZeRO stage writes the shards a run writes", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::string> w2{"--schedule", "1f1b", "--stages", "2", "--replicas", "2",
                                    "--microbatches", "2"};
  const std::string whole = dir / "whole.safetensors";
  run_ok(gpt(dir, with(w2, {"--save", whole})));
  for (const char* z : {"0", "1", "2"})
    run_ok(gpt(dir, with(w2, {"--zero", z, "--save-every", "4", "--checkpoint-dir",
                              dir / (std::string("ck") + z)})));
  const std::string want = read_file(whole);
  REQUIRE(!want.empty());
  const std::string ck1 = dir / "ck1";
  // The same layout under ZeRO 0 and 2: every rank file as the run under it wrote it.
  reshard(ck1, dir / "to0", {"--zero", "0"});
  reshard(ck1, dir / "to2", {"--zero", "2"});
  reshard(dir / "ck2", dir / "back1", {"--zero", "1"});
  for (int r = 0; r < 4; ++r) {
    same_rank_file(rank_file(dir / "to0", 4, r), rank_file(dir / "ck0", 4, r));
    same_rank_file(rank_file(dir / "to2", 4, r), rank_file(dir / "ck2", 4, r));
    same_rank_file(rank_file(dir / "back1", 4, r), rank_file(ck1, 4, r));
  }
  CHECK(resume(dir, dir / "to0") == want);
  CHECK(resume(dir, dir / "to2") == want);
  // Other stages and schedules with the same replicas: the uninterrupted run's bits.
  reshard(ck1, dir / "p4", {"--stages", "4", "--zero", "2"});
  CHECK(resume(dir, dir / "p4") == want);
  reshard(ck1, dir / "v2", {"--schedule", "interleaved", "--chunks", "2"});
  CHECK(resume(dir, dir / "v2") == want);
  // Other replica counts change the order of the gradient's sums after the cut: the shards
  // re-cut resume to the bits of the unsharded checkpoint of the same run re-cut alike, and back
  // at w = 2 (before a step) to the uninterrupted run's.
  reshard(ck1, dir / "w1", {"--replicas", "1", "--microbatches", "4", "--zero", "0"});
  reshard(dir / "ck0", dir / "w1-ref", {"--replicas", "1", "--microbatches", "4"});
  const std::string one = resume(dir, dir / "w1");
  REQUIRE(!one.empty());
  CHECK(one == resume(dir, dir / "w1-ref"));
  reshard(ck1, dir / "w4", {"--replicas", "4", "--microbatches", "1", "--zero", "2"});
  reshard(dir / "ck0", dir / "w4-ref", {"--replicas", "4", "--microbatches", "1", "--zero", "0"});
  const std::string four = resume(dir, dir / "w4");
  REQUIRE(!four.empty());
  CHECK(four == resume(dir, dir / "w4-ref"));
  for (const auto& [stage, count] : keepers(dir / "w4", 4, 8)) {
    INFO("stage " << stage);
    for (int c : count) CHECK(c == 1);
  }
  reshard(dir / "w4", dir / "w4-back", {"--replicas", "2", "--microbatches", "2", "--zero", "1"});
  for (int r = 0; r < 4; ++r) same_rank_file(rank_file(dir / "w4-back", 4, r), rank_file(ck1, 4, r));
  CHECK(resume(dir, dir / "w4-back") == want);
  // Without --zero a layout of one replica keeps every moment; with it, a run of one is refused.
  reshard(ck1, dir / "none", {"--schedule", "none", "--microbatches", "4"});
  for (const auto& [stage, count] : keepers(dir / "none", 4, 1))
    for (int c : count) CHECK(c == 1);
  const cli_result one_replica = run_cli({"checkpoint", "reshard", ck1, "--out", dir / "bad",
                                          "--replicas", "1", "--zero", "1"});
  CHECK(one_replica.exit_code == 2);
  CHECK(contains(one_replica.err, "--zero"));
  CHECK(contains(one_replica.err, "--replicas"));
  CHECK(!std::filesystem::exists(dir / "bad"));
  const cli_result three = run_cli({"checkpoint", "reshard", ck1, "--out", dir / "bad", "--zero", "3"});
  CHECK(three.exit_code == 2);
  CHECK(contains(three.err, "--zero"));
  CHECK(!std::filesystem::exists(dir / "bad"));
}
