// `pipeworks checkpoint inspect DIR`: the latest complete checkpoint (or --step N) in a checkpoint
// directory: its step, data position, plan and data, and each rank file checked by size, sha256,
// step, rank and plan fields, with its tensors grouped by kind (weights, older versions,
// optimizer state, in-flight state).
// A checkpoint pruned while it is inspected (a run with --keep) is never reported as damaged.
// `checkpoint export` is cli/checkpoint_export.cpp, `checkpoint reshard` cli/checkpoint_reshard.cpp.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/checkpoint_export.hpp"
#include "cli/checkpoint_reshard.hpp"
#include "cli/command.hpp"
#include "cli/options.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/checkpoint/read_checkpoint.hpp"

namespace pipeworks::cli {
namespace {

using json = nlohmann::json;

struct inspect_options {
  std::string dir;
  std::int64_t step = -1;  // -1: the latest complete checkpoint
  bool json = false;
};

// The tensors of one group: "weights" (plain names: the latest weights) or the prefix before
// the first '/' ("pipeworks.optim.m", "pipeworks.version.5", ...).
struct tensor_group {
  std::string name;
  std::int64_t count = 0;
  std::uint64_t bytes = 0;
};

struct file_report {
  checkpoint_file file;
  std::string error;                  // empty when the size and sha256 match
  std::string tensors_error;          // empty when the tensors could be listed
  std::vector<tensor_group> groups;   // "weights" first, then by name
};

std::string group_of(const std::string& tensor) {
  const auto slash = tensor.find('/');
  return slash == std::string::npos ? "weights" : tensor.substr(0, slash);
}

std::vector<tensor_group> group_tensors(const safetensors_file& f) {
  std::map<std::string, tensor_group> by_name;
  for (const safetensors_info& t : f.tensors) {
    tensor_group& g = by_name[group_of(t.name)];
    g.name = group_of(t.name);
    ++g.count;
    g.bytes += t.end - t.begin;
  }
  std::vector<tensor_group> out;
  if (auto it = by_name.find("weights"); it != by_name.end()) out.push_back(it->second);
  for (const auto& [name, g] : by_name)
    if (name != "weights") out.push_back(g);
  return out;
}

// "model gpt-small (gpt), schedule 1f1b, stages 4, microbatches 8, replicas 1" from whichever of
// these keys the plan has; empty when it has none.
std::string plan_summary(const json& plan) {
  auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  auto at = [&](const char* object, const char* key) -> const json* {
    if (!plan.is_object() || !plan.contains(object) || !plan.at(object).is_object()) return nullptr;
    const json& o = plan.at(object);
    return o.contains(key) ? &o.at(key) : nullptr;
  };
  std::vector<std::string> parts;
  const json* name = at("model", "name");
  const json* type = at("model", "type");
  if (name && type) parts.push_back("model " + text(*name) + " (" + text(*type) + ")");
  else if (name || type) parts.push_back("model " + text(name ? *name : *type));
  if (const json* kind = at("schedule", "kind")) parts.push_back("schedule " + text(*kind));
  for (const char* key : {"stages", "microbatches", "replicas"})
    if (const json* v = at("schedule", key)) parts.push_back(std::string(key) + " " + text(*v));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// The file by size and sha256, then, when those match, its step, rank and plan fields against the
// manifest's (a rank file of another checkpoint copied in, its sha256 updated, is named).
file_report inspect_file(const checkpoint_file& f, const std::string& step_path,
                         const checkpoint_manifest& m, const run_plan* plan) {
  file_report r{f, {}, {}, {}};
  if (auto s = verify_file(f, step_path); !s) r.error = s.message();
  const std::string path = file_dir(f, step_path) + "/" + f.path;
  auto st = read_safetensors(path);
  if (st) r.groups = group_tensors(*st);
  else r.tensors_error = st.message();
  if (st && r.error.empty() && plan)
    if (status s = check_rank_metadata(st->metadata, path, m, *plan, f.rank); !s) r.error = s.message();
  return r;
}

json report_json(const std::string& step_path, const checkpoint_manifest& m,
                 const std::vector<file_report>& files, bool ok) {
  json out_files = json::array();
  for (const file_report& r : files) {
    json groups = json::array();
    for (const tensor_group& g : r.groups)
      groups.push_back({{"group", g.name}, {"count", g.count}, {"bytes", g.bytes}});
    json jf = {{"rank", r.file.rank},   {"path", r.file.path},   {"bytes", r.file.bytes},
               {"sha256", r.file.sha256}, {"verified", r.error.empty()}, {"tensors", groups}};
    if (!r.file.dir.empty()) {
      jf["host"] = r.file.host;
      jf["dir"] = r.file.dir;
    }
    if (!r.error.empty()) jf["error"] = r.error;
    if (!r.tensors_error.empty()) jf["tensors_error"] = r.tensors_error;
    out_files.push_back(std::move(jf));
  }
  json out = {{"step_dir", step_path},
              {"step", m.step},
              {"data_position", m.data_position},
              {"plan", plan_summary(m.plan)},
              {"metrics", m.metrics},
              {"data", m.data ? json(record_json(*m.data)) : json(nullptr)},
              {"files", out_files},
              {"verified", ok}};
  if (!m.restart.is_null()) out["restart"] = m.restart;  // checkpoint reshard --restart-pipeline
  return out;
}

void print_report(const std::string& step_path, const checkpoint_manifest& m,
                  const std::vector<file_report>& files) {
  std::printf("checkpoint %s: step %lld, data position %lld\n", step_path.c_str(),
              static_cast<long long>(m.step), static_cast<long long>(m.data_position));
  const std::string plan = plan_summary(m.plan);
  std::printf("plan: %s\n", plan.empty() ? "(no model or schedule recorded)" : plan.c_str());
  if (m.metrics.is_object() && !m.metrics.empty()) std::printf("metrics: %s\n", m.metrics.dump().c_str());
  if (!m.restart.is_null())
    std::printf("restarted (checkpoint reshard --restart-pipeline): not the interrupted run's "
                "computation; %s\n", m.restart.dump().c_str());
  if (m.data) {
    const data_fingerprint& d = m.data->fingerprint;
    std::printf("data: %s, %llu bytes in %llu file%s, sha256 %s\n", d.path.c_str(),
                static_cast<unsigned long long>(d.bytes), static_cast<unsigned long long>(d.files),
                d.files == 1 ? "" : "s", d.sha256.c_str());
    if (m.data->replaced)
      std::printf("  resumed on other data at step %lld (--resume-on-other-data), replacing %s "
                  "(sha256 %s)\n", static_cast<long long>(m.data->replaced_at),
                  m.data->replaced->path.c_str(), m.data->replaced->sha256.c_str());
  }
  for (const file_report& r : files) {
    const std::string where = r.file.dir.empty() ? "" : " (in " + r.file.dir + " on " + r.file.host + ")";
    std::printf("rank %d: %s%s, %llu bytes, %s\n", r.file.rank, r.file.path.c_str(), where.c_str(),
                static_cast<unsigned long long>(r.file.bytes),
                r.error.empty() ? "sha256 OK" : ("FAILED: " + r.error).c_str());
    for (const tensor_group& g : r.groups)
      std::printf("  %s: %lld tensors, %llu bytes\n", g.name.c_str(), static_cast<long long>(g.count),
                  static_cast<unsigned long long>(g.bytes));
    if (!r.tensors_error.empty()) std::printf("  tensors: cannot list: %s\n", r.tensors_error.c_str());
  }
}

int run_inspect(const inspect_options& o) {
  // A run pruning the directory meanwhile makes read_checkpoint read the newest checkpoint again:
  // the reports are of the last checkpoint read.
  std::vector<file_report> files;
  bool ok = true;
  auto got = read_checkpoint(o.dir, o.step, [&](const chosen_checkpoint& c) -> status {
    files.clear();
    ok = true;
    std::string first_error;
    auto plan = parse_run_plan(c.manifest.plan.dump(), c.dir + "/manifest.json (its plan)");
    for (int rank = 0; rank < static_cast<int>(c.manifest.files.size()); ++rank)
      for (const checkpoint_file& f : c.manifest.files)
        if (f.rank == rank) {
          files.push_back(inspect_file(f, c.dir, c.manifest, plan ? &*plan : nullptr));
          ok = ok && files.back().error.empty();
          if (first_error.empty())
            first_error = !files.back().error.empty() ? files.back().error : files.back().tensors_error;
        }
    return first_error.empty() ? status{} : status{make_error(first_error)};
  });
  if (!got) throw pipeworks_error(got.message());
  const std::string& step_path = got->checkpoint.dir;
  const checkpoint_manifest& m = got->checkpoint.manifest;
  if (o.json) std::cout << report_json(step_path, m, files, ok).dump() << std::endl;
  else print_report(step_path, m, files);
  for (const file_report& r : files)
    if (!r.error.empty()) std::cerr << "pipeworks checkpoint inspect: " << r.error << "\n";
  if (!ok) return exit_failure;
  if (!o.json) std::printf("all %zu files verified\n", files.size());
  return exit_ok;
}

const bool registered = register_command(
    "checkpoint", "Inspect a run's checkpoints (`checkpoint inspect DIR`), export one's model "
                  "(`checkpoint export DIR --out FILE`) or re-cut one for another layout "
                  "(`checkpoint reshard DIR --out NEWDIR --stages P ...`)",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<inspect_options>();
      auto e = std::make_shared<export_options>();
      auto r = std::make_shared<reshard_options>();
      sub.require_subcommand(1);
      CLI::App* inspect = sub.add_subcommand(
          "inspect", "Show a checkpoint's step, plan and files, checking each file's sha256");
      inspect->add_option("dir", o->dir, "the checkpoint directory (holding step-NNNNNNNN/)")
          ->required();
      inspect->add_option("--step", o->step, "the checkpoint of this step (default: the latest "
                                             "complete one)")
          ->check(nonnegative_int);
      inspect->add_flag("--json", o->json,
                        "one JSON object: {\"step_dir\", \"step\", \"data_position\", \"plan\" (a "
                        "one-line summary), \"metrics\", \"data\" (its path and fingerprint; "
                        "null when the program supplied it), \"files\": [{\"rank\", \"path\", "
                        "\"bytes\", \"sha256\", \"verified\", \"error\" (when not verified), "
                        "\"tensors\": [{\"group\", \"count\", \"bytes\"}]}], \"verified\"}, and \"restart\" "
                        "(what checkpoint reshard --restart-pipeline dropped) when it has one");
      CLI::App* exporting = add_export_subcommand(sub, *e);
      CLI::App* resharding = add_reshard_subcommand(sub, *r);
      return [o, e, r, exporting, resharding] {
        if (exporting->parsed()) return run_export(*e);
        if (resharding->parsed()) return run_reshard(*r);
        return run_inspect(*o);
      };
    });

}  // namespace
}  // namespace pipeworks::cli
