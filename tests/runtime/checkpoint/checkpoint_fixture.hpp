// Test helper for the checkpoint directory tests: a complete checkpoint of small rank files, and
// the bytes of every file under a directory (to show that nothing else changed).
#pragma once
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ops/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks::test {

// gpt-tiny, 1F1B over `ranks` stages, at data position `position`: a plan read_checked_manifest
// takes, with one rank file per stage.
inline run_plan small_plan(int ranks, std::int64_t position) {
  run_plan p;
  p.model = *parse_model_spec("gpt-tiny");
  p.schedule = schedule_kind::one_f_one_b;
  p.stages = ranks;
  p.train.steps = 100;
  p.train.microbatches = 4;
  p.data.source = data_source::text;
  p.data.path = "/usr/share/games/fortunes";
  p.data.batch = 8;
  p.data.position = position;
  return p;
}

// A complete checkpoint of `step` in dir with `ranks` rank files holding one small tensor each
// (2 or more: one per stage of small_plan), their metadata that of small_plan's ranks at `step`.
inline checkpoint_manifest write_small_checkpoint(const std::string& dir, std::int64_t step,
                                                  int ranks = 2) {
  REQUIRE(prepare_step_dir(dir, step).ok());
  checkpoint_manifest m;
  m.step = step;
  m.data_position = step;
  m.plan = nlohmann::json::parse(to_json_text(small_plan(ranks, step)));
  m.rng = nlohmann::json::object();
  m.metrics = {{"samples", step * 8}};
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> w(16, static_cast<float>(step + r));
    const std::vector<safetensors_entry> e = {entry_of("h.0.w", {4, 4}, std::span(w))};
    const std::string name = rank_file_name(r);
    // The metadata a rank file of this plan, rank and step carries (rank_identity, rank_state).
    metadata_map md = rank_identity(small_plan(ranks, step), r);
    md["pipeworks.rank_state"] = nlohmann::json{{"rank", r}, {"step", step}}.dump();
    auto written =
        write_safetensors((std::filesystem::path(step_dir(dir, step)) / name).string(), e, md);
    REQUIRE(written.ok());
    m.files.push_back({r, name, written->bytes, written->sha256});
  }
  REQUIRE(write_manifest(dir, m).ok());
  return m;
}

// Every regular file under dir, by its path relative to dir, with its bytes.
inline std::map<std::string, std::string> files_under(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    out[std::filesystem::relative(e.path(), dir).string()] = bytes.str();
  }
  return out;
}

}  // namespace pipeworks::test
