// Checkpoint directories on disk: names of step directories and rank files, finding complete
// checkpoints, writing the manifest that completes one, and preparing and pruning directories
// (removing only pipeworks' own files, by name).
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "base/input_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
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

// Whether a step directory's entry `name` is one pipeworks writes there: manifest.json,
// rank-R.safetensors, or the temporary either is written through (".NAME.tmp.HOST.PID.N", see
// write_file_atomic). Only these are ever removed from a step directory.
bool own_name(const std::string& name) {
  auto is_target = [](const std::string& n) {
    if (n == manifest_name) return true;
    const std::string prefix = "rank-", suffix = ".safetensors";
    if (n.size() <= prefix.size() + suffix.size() || n.compare(0, prefix.size(), prefix) != 0 ||
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    const std::string digits = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
    if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(),
                                          [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    return rank_file_name(std::stoi(digits)) == n;  // "rank-01.safetensors" is not ours
  };
  if (is_target(name)) return true;
  const std::string tmp = ".tmp.";
  if (name.size() < 2 || name[0] != '.') return false;
  const auto at = name.find(tmp, 1);
  return at != std::string::npos && at + tmp.size() < name.size() &&
         is_target(name.substr(1, at - 1));
}

struct step_contents {
  std::vector<std::string> own;      // regular files of own_name, manifest.json first
  std::vector<std::string> foreign;  // everything else, sorted
};

// What a step directory holds, split into pipeworks' own files and the rest. A directory gone
// meanwhile (another process removed it) holds nothing.
result<step_contents> contents_of(const std::string& path) {
  step_contents out;
  std::error_code ec;
  fs::directory_iterator it(path, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    const bool regular = it->symlink_status(type_ec).type() == fs::file_type::regular;
    (regular && own_name(name) ? out.own : out.foreign).push_back(name);
  }
  if (ec) return make_error("cannot list " + path + ": " + ec.message());
  std::sort(out.own.begin(), out.own.end(), [](const std::string& a, const std::string& b) {
    return (a == manifest_name) != (b == manifest_name) ? a == manifest_name : a < b;
  });
  std::sort(out.foreign.begin(), out.foreign.end());
  return out;
}

// "sub, notes.txt, .hidden, ..." (the first three).
std::string entry_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 3) out += ", ... (" + std::to_string(names.size()) + " entries)";
  return out;
}

// Removes pipeworks' own files from a step directory, its manifest first (made durable), so that
// a crash partway leaves an incomplete checkpoint rather than one that looks complete but lacks
// files; then, when remove_dir, the directory itself if nothing else is in it. Anything else in
// it stays where it is: the names of what stayed (none when the directory went). A file or the
// directory gone meanwhile is no error: two workers of one host may share a directory.
result<std::vector<std::string>> clear_own_files(const std::string& path, bool remove_dir) {
  auto contents = contents_of(path);
  if (!contents) return contents.err();
  bool removed = false;
  for (const std::string& name : contents->own) {
    const std::string file = (fs::path(path) / name).string();
    if (::unlink(file.c_str()) != 0 && errno != ENOENT)
      return make_error("cannot remove " + file + ": " + std::strerror(errno));
    removed = true;
    if (name == manifest_name)
      if (auto s = fsync_directory(path); !s) return make_error(s.message());
  }
  if (!remove_dir || !contents->foreign.empty()) {
    if (removed)
      if (auto s = fsync_directory(path); !s) return make_error(s.message());
    return std::move(contents->foreign);
  }
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return std::vector<std::string>{};
  if (errno != ENOTEMPTY && errno != EEXIST)
    return make_error("cannot remove " + path + ": " + std::strerror(errno));
  auto now = contents_of(path);  // something was put there meanwhile
  if (!now) return now.err();
  return std::move(now->foreign);
}

// Removes one step directory as clear_own_files does; what it leaves is named in `left`.
status remove_step_dir(const std::string& path, std::vector<std::string>& left) {
  auto kept = clear_own_files(path, true);
  if (!kept) return kept.err();
  if (!kept->empty())
    left.push_back(path + " (it holds " + entry_list(*kept) + ", which pipeworks did not write)");
  return {};
}

// Whether any step directory in dirs has a manifest.json (complete, or damaged).
bool any_manifest(const std::string& dir, const std::vector<step_entry>& dirs) {
  return std::any_of(dirs.begin(), dirs.end(), [&](const step_entry& e) {
    return exists_no_follow(manifest_path(dir, e.step));
  });
}

// Why dir, whose step directories have no manifest, holds nothing to resume, and what to do.
std::string nothing_to_resume(const std::string& dir, const std::vector<step_entry>& dirs) {
  const bool one = dirs.size() == 1;
  return dir + " holds no complete checkpoint (no step-*/manifest.json): " + name_list(dirs) +
         (one ? " was" : " were") + " cut short before " + (one ? "its" : "their") +
         " manifest was written, so there is nothing to resume or read, and a new run does not "
         "start beside " + (one ? "it" : "them") + "; move " + (one ? "it" : "them") + " out of " +
         dir + " to start the run there again, or give the run another checkpoint directory";
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

std::string other_checkpoint_advice(const std::string& dir, std::int64_t step) {
  std::int64_t newer = -1, older = -1;
  if (auto steps = complete_steps(dir))
    for (std::int64_t n : *steps) {
      if (n > step && newer < 0) newer = n;
      if (n < step) older = n;
    }
  const std::string path = step_dir(dir, step);
  if (newer >= 0)
    return "restore it (the newer checkpoint of step " + std::to_string(newer) +
           " does not depend on it)";
  if (older >= 0)
    return "restore it, or move " + path + " out of " + dir + " to use the checkpoint of step " +
           std::to_string(older);
  return "restore it (no other complete checkpoint is in " + dir + ")";
}

result<std::int64_t> latest_complete(const std::string& dir) {
  // A run pruning dir meanwhile may complete a newer checkpoint after this passed over it and then
  // remove the older one before this reaches it; it never removes its newest complete one, so a
  // scan that finds none is made again (the race needs a whole checkpoint written within a scan).
  for (int scan = 0;; ++scan) {
    auto dirs = step_dirs(dir);
    if (!dirs) return dirs.err();
    for (auto it = dirs->rbegin(); it != dirs->rend(); ++it) {
      auto m = read_manifest(dir, it->step);
      if (m) return it->step;
      // A manifest is written whole (temporary file, then rename): one that is there but does not
      // read back was damaged or edited, which is never passed over in silence.
      if (!exists_no_follow(manifest_path(dir, it->step))) continue;
      return make_error(m.message() + "; the newest checkpoint's manifest is unreadable or "
                        "damaged: " + other_checkpoint_advice(dir, it->step));
    }
    if (dirs->empty())
      return make_error(dir + " holds no complete checkpoint (no step-*/manifest.json); give the "
                        "directory a run wrote its checkpoints to, or start a new run");
    if (scan == 2) return make_error(nothing_to_resume(dir, *dirs));
  }
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

status prepare_checkpoint_dir(const std::string& dir, bool resuming, const std::string& flag) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (st.type() != fs::file_type::not_found && st.type() != fs::file_type::directory && !ec)
    return make_error(dir + " exists and is not a directory: choose another " + flag);
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create checkpoint directory " + dir + ": " + ec.message());
  // A symbolic link or a file named like a step directory is no checkpoint pipeworks wrote, and
  // a checkpoint must never be written through it (into whatever it points at).
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!step_of(name)) continue;
    std::error_code type_ec;
    const auto type = it->symlink_status(type_ec).type();
    if (type != fs::file_type::directory)
      return make_error((fs::path(dir) / name).string() + " is " +
                        (type == fs::file_type::symlink ? "a symbolic link" : "not a directory") +
                        ", named like a checkpoint's step directory but not one pipeworks wrote: "
                        "move it out of " + dir + ", or choose another " + flag);
  }
  if (resuming) return {};  // read from; run_checkpoints probes it when it will be written to
  if (status s = probe_writable_dir(dir); !s) return s;  // found now, not at the first checkpoint
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  if (dirs->empty()) return {};
  // Only step directories without a manifest: --resume has nothing to take either, so the advice
  // is the one it gives.
  if (!any_manifest(dir, *dirs)) return make_error(nothing_to_resume(dir, *dirs));
  return make_error(dir + " already holds checkpoints (" + name_list(*dirs) +
                    "): continue that run with --resume " + dir +
                    ", or choose another " + flag);
}

status make_own_step_dir(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return make_error("cannot create " + path + (ec ? ": " + ec.message() : std::string()));
  if (!S_ISDIR(st.st_mode))
    return make_error(path + " is " + (S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory") +
                      " (pipeworks did not make it); move it out of the checkpoint directory and "
                      "resume from the latest complete checkpoint");
  return {};
}

status prepare_step_dir(const std::string& dir, std::int64_t step) {
  const std::string path = step_dir(dir, step);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return make_error(path + " exists and is not a directory (pipeworks did not write it); move "
                        "it out of " + dir + " to write the checkpoint of step " +
                        std::to_string(step) + " there");
    if (exists_no_follow((fs::path(path) / manifest_name).string()))
      return make_error(path + " already holds a checkpoint (its manifest.json exists), and a "
                        "complete checkpoint is never overwritten: another run wrote it after "
                        "this one's position; resume from the newest checkpoint in " + dir +
                        ", or give this run a checkpoint directory of its own");
    // A checkpoint cut short before its manifest: its own files go, anything else stays.
    auto kept = clear_own_files(path, false);
    if (!kept) return kept.err();
    return {};
  }
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return make_error("cannot create " + path + ": " + ec.message());
  return fsync_directory(dir);
}

namespace {

// The step directories prune_checkpoints removes: complete ones older than the newest `keep`,
// and incomplete ones older than the newest complete one. Nothing while none is complete.
std::vector<step_entry> doomed_steps(const std::string& dir, const std::vector<step_entry>& dirs,
                                     int keep) {
  std::vector<step_entry> complete, incomplete, out;
  for (const step_entry& e : dirs) (read_manifest(dir, e.step).ok() ? complete : incomplete).push_back(e);
  if (complete.empty()) return out;  // nothing to keep yet: leave checkpoints being written alone
  const std::int64_t newest = complete.back().step;
  const std::size_t old = complete.size() > static_cast<std::size_t>(keep)
                              ? complete.size() - static_cast<std::size_t>(keep)
                              : 0;
  out.assign(complete.begin(), complete.begin() + static_cast<std::ptrdiff_t>(old));
  for (const step_entry& e : incomplete)
    if (e.step < newest) out.push_back(e);
  return out;
}

}  // namespace

status prune_checkpoints(const std::string& dir, int keep) {
  if (keep <= 0) return {};
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  const std::vector<step_entry> doomed = doomed_steps(dir, *dirs, keep);
  std::vector<std::string> left;  // named by foreign_step_dirs, when the caller asks
  for (const step_entry& e : doomed)
    if (auto s = remove_step_dir((fs::path(dir) / e.name).string(), left); !s) return s;
  if (doomed.empty()) return {};
  return fsync_directory(dir);
}

result<std::vector<std::string>> foreign_step_dirs(const std::string& dir) {
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  std::vector<std::string> out;
  for (const step_entry& e : doomed_steps(dir, *dirs, std::numeric_limits<int>::max())) {
    const std::string path = (fs::path(dir) / e.name).string();
    auto contents = contents_of(path);
    if (!contents) return contents.err();
    if (!contents->foreign.empty())
      out.push_back(path + " (it holds " + entry_list(contents->foreign) +
                    ", which pipeworks did not write)");
  }
  return out;
}

status prune_kept_steps(const std::string& dir, const std::vector<std::int64_t>& kept) {
  if (kept.empty() || !exists_no_follow(dir)) return {};
  auto dirs = step_dirs(dir);
  if (!dirs) return dirs.err();
  const std::int64_t newest = *std::max_element(kept.begin(), kept.end());
  bool removed = false;
  std::vector<std::string> left;
  for (const step_entry& e : *dirs) {
    if (e.step >= newest || std::find(kept.begin(), kept.end(), e.step) != kept.end()) continue;
    // Two workers of one host may share the directory and both remove it: gone is done.
    if (auto s = remove_step_dir((fs::path(dir) / e.name).string(), left); !s) return s;
    removed = true;
  }
  if (removed)
    if (status s = fsync_directory(dir); !s) return s;
  if (left.empty()) return {};
  std::string names;
  for (const std::string& l : left) names += (names.empty() ? "" : "; ") + l;
  return make_error("left " + names + ": only pipeworks' own files were removed");
}

}  // namespace pipeworks
