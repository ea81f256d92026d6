// Checkpoint directories on disk: names of step directories and rank files, finding complete
// checkpoints, writing the manifest that completes one, and preparing and pruning directories.
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "base/input_file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "ops/checkpoint/atomic_file.hpp"

namespace pipeworks {
namespace {

namespace fs = std::filesystem;

struct step_entry {
  std::int64_t step = 0;
  std::string name;  // "step-00000010"
};

// The step of a name as step_dir_name writes it ("step-" and 8 or more digits, zero-padded to
// exactly 8); nothing for any other name.
std::optional<std::int64_t> step_of(const std::string& name) {
  const std::string prefix = "step-";
  if (name.size() < prefix.size() + 8 || name.size() > prefix.size() + 18 ||
      name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  std::int64_t step = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  if (step_dir_name(step) != name) return std::nullopt;  // "step-000000010" is not ours
  return step;
}

bool exists_no_follow(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string manifest_path(const std::string& dir, std::int64_t step) {
  return (fs::path(step_dir(dir, step)) / manifest_name).string();
}

// The step directories in dir (real directories, not links), ascending by step; an error naming
// dir when it is missing or cannot be listed.
result<std::vector<step_entry>> step_dirs(const std::string& dir) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found)
    return make_error("checkpoint directory " + dir + " does not exist");
  if (!ec && st.type() != fs::file_type::directory)
    return make_error("checkpoint directory " + dir + " is not a directory");
  std::vector<step_entry> out;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto step = step_of(name);
    if (!step) continue;
    std::error_code type_ec;
    if (it->symlink_status(type_ec).type() == fs::file_type::directory) out.push_back({*step, name});
  }
  if (ec) return make_error("cannot list checkpoint directory " + dir + ": " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const step_entry& a, const step_entry& b) { return a.step < b.step; });
  return out;
}

// "step-00000010, step-00000020, step-00000030, ..." (the first three).
std::string name_list(const std::vector<step_entry>& steps) {
  std::string out;
  for (std::size_t i = 0; i < steps.size() && i < 3; ++i) out += (i ? ", " : "") + steps[i].name;
  if (steps.size() > 3) out += ", ...";
  return out;
}

// Removes everything inside `path`, keeping the directory itself.
status empty_directory(const std::string& path) {
  std::error_code ec;
  fs::directory_iterator it(path, ec);
  std::vector<fs::path> entries;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) entries.push_back(it->path());
  if (ec) return make_error("cannot list " + path + " to empty it: " + ec.message());
  for (const auto& e : entries)
    if (fs::remove_all(e, ec); ec)
      return make_error("cannot remove " + e.string() + ": " + ec.message());
  return fsync_directory(path);
}

// Removes one step directory: its manifest first (made durable), so that a crash partway
// leaves an incomplete checkpoint rather than one that looks complete but lacks files.
status remove_step_dir(const std::string& path) {
  const std::string manifest = (fs::path(path) / manifest_name).string();
  if (exists_no_follow(manifest)) {
    if (::unlink(manifest.c_str()) != 0)
      return make_error("cannot remove " + manifest + ": " + std::strerror(errno));
    if (auto s = fsync_directory(path); !s) return s;
  }
  std::error_code ec;
  if (fs::remove_all(path, ec); ec) return make_error("cannot remove " + path + ": " + ec.message());
  return {};
}

}  // namespace

std::string step_dir_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::string step_dir(const std::string& dir, std::int64_t step) {
  return (fs::path(dir) / step_dir_name(step)).string();
}

std::string rank_file_name(int rank) { return "rank-" + std::to_string(rank) + ".safetensors"; }

result<checkpoint_manifest> read_manifest(const std::string& dir, std::int64_t step) {
  const std::string path = manifest_path(dir, step);
  if (!exists_no_follow(path))
    return make_error(path + " does not exist: there is no complete checkpoint of step " +
                      std::to_string(step) + " in " + dir);
  auto text = read_input_text(path, json_input_limit, "manifest");
  if (!text) return text.err();
  auto m = parse_manifest(*text, path);
  if (!m) return m.err();
  if (m->step != step)
    return make_error(path + ": step is " + std::to_string(m->step) + " but the manifest is in " +
                      step_dir_name(step) + "; it was moved or edited by hand");
  return m;
}

result<std::vector<std::int64_t>> complete_steps(const std::string& dir) {
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  std::vector<std::int64_t> out;
  for (const step_entry& e : *dirs)
    if (read_manifest(dir, e.step).ok()) out.push_back(e.step);
  return out;
}

result<std::int64_t> latest_complete(const std::string& dir) {
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  for (auto it = dirs->rbegin(); it != dirs->rend(); ++it) {
    auto m = read_manifest(dir, it->step);
    if (m) return it->step;
    // A manifest is written whole (temporary file, then rename): one that is there but does not
    // read back was damaged or edited, which is never passed over in silence.
    if (!exists_no_follow(manifest_path(dir, it->step))) continue;
    std::string older;
    for (auto o = std::next(it); o != dirs->rend() && older.empty(); ++o)
      if (read_manifest(dir, o->step).ok()) older = std::to_string(o->step);
    return make_error(m.message() + "; the newest checkpoint's manifest is unreadable or damaged: "
                      "restore it, or move " + step_dir(dir, it->step) + " out of " + dir +
                      (older.empty() ? std::string(" (no older complete checkpoint is there)")
                                     : " to use the checkpoint of step " + older));
  }
  std::string message = dir + " holds no complete checkpoint (no step-*/manifest.json); ";
  if (dirs->empty())
    message += "give the directory a run wrote its checkpoints to, or start a new run";
  else
    message += name_list(*dirs) + (dirs->size() == 1 ? " was" : " were") +
               " cut short before its manifest was written (or the manifest is unreadable: "
               "check with `pipeworks checkpoint inspect`); start the run again";
  return make_error(message);
}

status write_manifest(const std::string& dir, const checkpoint_manifest& m) {
  const std::string path = manifest_path(dir, m.step);
  const std::string text = to_json(m);
  // Never write a manifest that could not be read back.
  if (auto back = parse_manifest(text, path); !back)
    return make_error("refusing to write an invalid manifest: " + back.message());
  // Its step directory exists once a rank file is in it; not when every file is in a worker's own.
  std::error_code ec;
  if (fs::create_directories(step_dir(dir, m.step), ec); ec)
    return make_error("cannot make " + step_dir(dir, m.step) + ": " + ec.message());
  const std::span<const std::byte> part = std::as_bytes(std::span(text.data(), text.size()));
  auto written = write_file_atomic(path, std::span(&part, 1));
  if (!written) return written.err();
  return {};
}

status prepare_checkpoint_dir(const std::string& dir, bool resuming) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (st.type() != fs::file_type::not_found && st.type() != fs::file_type::directory && !ec)
    return make_error(dir + " exists and is not a directory: choose another --checkpoint-dir");
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create checkpoint directory " + dir + ": " + ec.message());
  if (resuming) return {};  // read from; run_checkpoints probes it when it will be written to
  if (status s = probe_writable_dir(dir); !s) return s;  // found now, not at the first checkpoint
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  if (!dirs->empty())
    return make_error(dir + " already holds checkpoints (" + name_list(*dirs) +
                      "): continue that run with --resume " + dir +
                      ", or choose another --checkpoint-dir");
  return {};
}

status prepare_step_dir(const std::string& dir, std::int64_t step) {
  const std::string path = step_dir(dir, step);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return make_error(path + " exists and is not a directory; remove it to write the checkpoint "
                        "of step " + std::to_string(step));
    if (exists_no_follow((fs::path(path) / manifest_name).string()))
      return make_error(path + " already holds a checkpoint (its manifest.json exists); a "
                        "complete checkpoint is never overwritten: remove it by hand if it is "
                        "unwanted");
    return empty_directory(path);  // a checkpoint cut short before its manifest
  }
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return make_error("cannot create " + path + ": " + ec.message());
  return fsync_directory(dir);
}

status prune_checkpoints(const std::string& dir, int keep) {
  if (keep <= 0) return {};
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  std::vector<const step_entry*> complete, incomplete;
  for (const step_entry& e : *dirs)
    (read_manifest(dir, e.step).ok() ? complete : incomplete).push_back(&e);
  if (complete.empty()) return {};  // nothing to keep yet: leave checkpoints being written alone
  const std::int64_t newest = complete.back()->step;
  std::vector<const step_entry*> doomed;
  const std::size_t old = complete.size() > static_cast<std::size_t>(keep)
                              ? complete.size() - static_cast<std::size_t>(keep)
                              : 0;
  doomed.assign(complete.begin(), complete.begin() + static_cast<std::ptrdiff_t>(old));
  for (const step_entry* e : incomplete)
    if (e->step < newest) doomed.push_back(e);
  for (const step_entry* e : doomed)
    if (auto s = remove_step_dir((fs::path(dir) / e->name).string()); !s) return s;
  if (doomed.empty()) return {};
  return fsync_directory(dir);
}

status prune_kept_steps(const std::string& dir, const std::vector<std::int64_t>& kept) {
  if (kept.empty() || !exists_no_follow(dir)) return {};
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  const std::int64_t newest = *std::max_element(kept.begin(), kept.end());
  bool removed = false;
  for (const step_entry& e : *dirs) {
    if (e.step >= newest || std::find(kept.begin(), kept.end(), e.step) != kept.end()) continue;
    const std::string path = (fs::path(dir) / e.name).string();
    // Two workers of one host may share the directory and both remove it: gone is done.
    if (auto s = remove_step_dir(path); !s && exists_no_follow(path)) return s;
    removed = true;
  }
  return removed ? fsync_directory(dir) : status{};
}

}  // namespace pipeworks
