// rank_identity and the check of a checkpoint's rank files against its manifest, reading only
// each file's safetensors header.
#include "runtime/checkpoint/rank_identity.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/plan_schedule.hpp"

namespace pipeworks {
namespace {

using json = nlohmann::json;

constexpr std::uint64_t max_header_bytes = std::uint64_t{100} << 20;

// The virtual stages rank r's device runs under the plan's schedule ({0} for none).
std::vector<int> stages_of(const run_plan& plan, int rank) {
  if (!plan.schedule) return {0};
  auto s = plan_schedule(plan, 0);
  std::vector<int> out;
  if (!s) return out;  // a plan that was checked always makes its schedule
  const int device = rank % std::max(1, plan.stages);
  for (int v = 0; v < static_cast<int>(s->device_of.size()); ++v)
    if (s->device_of[static_cast<std::size_t>(v)] == device) out.push_back(v);
  return out;
}

// How a field is named in messages: "pipeworks.optimizer (the optimizer kind)".
std::string field_words(const std::string& key) {
  if (key == "pipeworks.model") return "pipeworks.model (the model)";
  if (key == "pipeworks.schedule") return "pipeworks.schedule (the schedule)";
  if (key == "pipeworks.optimizer") return "pipeworks.optimizer (the optimizer kind)";
  if (key == "pipeworks.stages") return "pipeworks.stages (the rank's virtual stages)";
  if (key == "pipeworks.split") return "pipeworks.split (each stage's first block)";
  if (key == "pipeworks.microbatch") return "pipeworks.microbatch (samples per microbatch)";
  return key;
}

std::string shown(const std::string& v) { return v.size() > 80 ? v.substr(0, 77) + "..." : v; }

}  // namespace

metadata_map rank_identity(const run_plan& plan, int rank) {
  std::vector<int> split = plan.split;
  if (split.empty() && plan.virtual_stages() == 1) split = {0};
  if (!plan.schedule) split = {0};
  const std::int64_t parts =
      std::max<std::int64_t>(1, std::int64_t{plan.train.microbatches} * (plan.schedule ? plan.replicas : 1));
  return {{"pipeworks.model", to_json(plan.model).dump()},
          {"pipeworks.schedule", schedule_label(plan)},
          {"pipeworks.optimizer", std::string(optimizer_kind_name(plan.train.optim.kind))},
          {"pipeworks.stages", json(stages_of(plan, rank)).dump()},
          {"pipeworks.split", json(split).dump()},
          {"pipeworks.microbatch", std::to_string(plan.data.batch / parts)}};
}

result<metadata_map> read_rank_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path + ": " + std::strerror(errno));
  unsigned char size_bytes[8] = {};
  in.read(reinterpret_cast<char*>(size_bytes), 8);
  if (in.gcount() != 8) return make_error(path + " is too short to be a safetensors file");
  std::uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = size << 8 | size_bytes[i];
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec || size > max_header_bytes || size > file_size - 8)
    return make_error(path + ": its safetensors header claims " + std::to_string(size) +
                      " bytes, more than the file holds: it is not a pipeworks rank file");
  std::string header(size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::uint64_t>(in.gcount()) != size) return make_error("cannot read " + path);
  const json j = json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(path + ": its safetensors header is not a JSON object");
  metadata_map out;
  if (auto it = j.find("__metadata__"); it != j.end() && it->is_object())
    for (const auto& [k, v] : it->items())
      if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

status check_rank_metadata(const metadata_map& md, const std::string& path,
                           const checkpoint_manifest& m, const run_plan& plan, int rank) {
  auto state = md.find("pipeworks.rank_state");
  if (state == md.end())
    return make_error(path + " has no \"pipeworks.rank_state\" metadata: it is not a pipeworks "
                      "rank file");
  const json s = json::parse(state->second, nullptr, false);
  if (s.is_discarded() || !s.is_object() || !s.contains("step") || !s.contains("rank") ||
      !s["step"].is_number_integer() || !s["rank"].is_number_integer())
    return make_error(path + ": its \"pipeworks.rank_state\" metadata records no whole step and "
                      "rank: it is not what pipeworks writes");
  const auto step = s["step"].get<std::int64_t>();
  if (step != m.step)
    return make_error(path + " is a rank file of step " + std::to_string(step) +
                      ", but the manifest is of step " + std::to_string(m.step) +
                      ": a rank file of another checkpoint was put in its place (and the "
                      "manifest's size and sha256 for it changed to match); put back the rank "
                      "file of step " +
                      std::to_string(m.step));
  if (s["rank"].get<std::int64_t>() != rank)
    return make_error(path + " holds the state of rank " + std::to_string(s["rank"].get<std::int64_t>()) +
                      ", but the manifest lists it for rank " + std::to_string(rank) +
                      ": the files were swapped or copied; put back rank " + std::to_string(rank) +
                      "'s file");
  for (const auto& [key, want] : rank_identity(plan, rank)) {
    auto it = md.find(key);
    const std::string has = it == md.end() ? "nothing" : it->second;
    if (has != want)
      return make_error(path + ": its " + field_words(key) + " is " + shown(has) +
                        ", but the manifest's plan says " + shown(want) +
                        "; the manifest and the rank file are of different runs (was the "
                        "manifest's plan edited?)");
  }
  return {};
}

status check_rank_files(const checkpoint_manifest& m, const std::string& step_dir) {
  auto plan = parse_run_plan(m.plan.dump(), step_dir + "/manifest.json (its plan)");
  if (!plan) return plan.err();
  for (const checkpoint_file* f : files_here_by_rank(m)) {
    const std::string path = (std::filesystem::path(file_dir(*f, step_dir)) / f->path).string();
    auto md = read_rank_metadata(path);
    if (!md) return md.err();
    if (status s = check_rank_metadata(*md, path, m, *plan, f->rank); !s) return s;
  }
  return {};
}

}  // namespace pipeworks
