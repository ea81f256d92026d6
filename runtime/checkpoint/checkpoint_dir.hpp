// The layout of a checkpoint directory: DIR/step-00000010/ holds rank-<r>.safetensors per rank
// and manifest.json, written last; a step directory is a complete checkpoint iff its manifest
// exists and parses. Finding, preparing, completing and pruning checkpoints.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "runtime/checkpoint/manifest.hpp"

namespace pipeworks {

std::string step_dir_name(std::int64_t step);                 // "step-00000010"
std::string step_dir(const std::string& dir, std::int64_t step);  // "DIR/step-00000010"
std::string rank_file_name(int rank);                         // "rank-3.safetensors"
inline constexpr const char* manifest_name = "manifest.json";

// The steps of the complete checkpoints in dir, ascending: step directories whose manifest.json
// exists, parses and records that step. A missing dir is an error naming it.
result<std::vector<std::int64_t>> complete_steps(const std::string& dir);
// The newest complete checkpoint's step; an error naming dir when it holds none (and what to do:
// a directory of checkpoints cut short holds nothing to resume, and a new run does not start among
// them either), and an error naming the manifest when the newest step directory's manifest.json
// is there but does not read back (damaged or edited: never skipped in silence for an older
// checkpoint). A run pruning dir meanwhile never makes it report none.
result<std::int64_t> latest_complete(const std::string& dir);
// What to do about the checkpoint of `step` in dir when it cannot be used (damaged or edited):
// restore it, or move it out of dir when an older complete checkpoint would then be the newest.
// Never advice to remove a checkpoint.
std::string other_checkpoint_advice(const std::string& dir, std::int64_t step);

// Reads and parses step_dir(dir, step)/manifest.json; an error when it is absent, does not parse
// or records another step.
result<checkpoint_manifest> read_manifest(const std::string& dir, std::int64_t step);
// Writes step_dir(dir, m.step)/manifest.json atomically (making the step directory when every
// file is elsewhere), marking the checkpoint complete. The rank files must be in place first. Refuses a manifest that parse_manifest would refuse.
status write_manifest(const std::string& dir, const checkpoint_manifest& m);

// Creates dir and its parents. Unless resuming, refuses a dir that already holds a step
// directory (complete or not), so a new run never mixes with an old one. Refuses a file.
// `flag` names the directory in errors (--checkpoint-dir, or reshard's --out).
status prepare_checkpoint_dir(const std::string& dir, bool resuming,
                              const std::string& flag = "--checkpoint-dir");
// Creates the step directory `path` where a rank writes its file, and makes sure it is a real
// directory: a symbolic link (or a file) named like it, planted there, is refused, never written
// through.
status make_own_step_dir(const std::string& path);

// Creates step_dir(dir, step). One left without a manifest (a checkpoint cut short) loses
// pipeworks' own files first (see prune_checkpoints); anything else in it stays. One with a
// manifest is an error: a complete checkpoint is never overwritten.
status prepare_step_dir(const std::string& dir, std::int64_t step);
// keep <= 0 keeps everything. Otherwise removes complete checkpoints older than the newest
// `keep` and incomplete step directories older than the newest complete one. Touches nothing but
// step-NNNNNNNN directories, and never the newest complete checkpoint. Removes only what
// pipeworks writes there, by name (manifest.json, rank-R.safetensors and their temporaries
// .NAME.tmp.*), the manifest first, so a crash midway never leaves one that looks complete but
// lacks files; a step directory that holds anything else keeps it and stays (foreign_step_dirs
// names it).
status prune_checkpoints(const std::string& dir, int keep);
// The step directories that pruning removes but left because they hold something pipeworks did
// not write: "DIR/step-00000003 (it holds sub, which pipeworks did not write)" for each.
result<std::vector<std::string>> foreign_step_dirs(const std::string& dir);
// A worker's own checkpoint directory of a run, after the driver pruned its own: removes the step
// directories older than the newest of `kept` (the complete checkpoints the driver keeps) that are
// not among them, as prune_checkpoints does. Nothing when kept is empty; a missing dir is no
// error. A step directory left for what else it holds is an error naming it, after the rest went.
status prune_kept_steps(const std::string& dir, const std::vector<std::int64_t>& kept);

}  // namespace pipeworks
