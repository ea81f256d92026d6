// A run's checkpoint directory: getting it ready (a new run refuses one that holds checkpoints; a
// resumed run reads the manifest of its position, refuses a directory with a complete checkpoint
// after it and clears pipeworks' files of checkpoints cut short after it), and
// the manifest of a checkpoint whose files are written. Shared by the driver and the single-device
// run.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "base/result.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {

// The checkpoint a resumed run starts from.
struct resume_point {
  checkpoint_manifest manifest;
  std::int64_t samples = 0;  // samples seen in the steps before it
};

// read_manifest, then the plan it records parsed, one file for each of that plan's ranks, a
// data_position and a plan.data.position equal to the step (within the plan's steps): a manifest
// edited or damaged otherwise is an error naming it.
result<checkpoint_manifest> read_checked_manifest(const std::string& dir, std::int64_t step);

// A run that resumes at plan.data.position and writes checkpoints (checkpoint.every > 0): its
// checkpoint.dir must be writable and hold no complete checkpoint after that position (the two
// histories would mix, and pruning would take the later one's checkpoints with them). The error
// says how to resume from the newest, or to go on from the position in a directory of its own.
// For a check before the run takes its lock: a newer checkpoint that a run still holding the
// directory wrote is no error here, since taking the lock then names that run.
// prepare_checkpoints, under the lock, refuses such a directory in any case.
status check_resume_dir(const run_plan& plan);

// The data path of the checkpoint m's plan, `plan_path`, made absolute by what m recorded: a
// relative path was relative to where its run started, and m holds the data's absolute path, so a
// resume from another directory reads the same data. Otherwise `plan_path` as it is.
std::string checkpoint_data_path(const checkpoint_manifest& m, const std::string& plan_path);

// Whether plan.data.path is the data the checkpoint m was trained on (data_changes): an error naming
// the path and what changed. No error when the plan's data comes from the program (callback).
status check_resume_data(const checkpoint_manifest& m, const run_plan& plan);

// The data record the run's manifests carry (set_run_data for its checkpoint.dir): the data's
// fingerprint now (none for a callback, or a path that cannot be read: the program supplies the
// data) and, for a run resumed from `resumed`, the data it replaced when it differs from that
// checkpoint's (or the checkpoint's own earlier replacement when it does not). Nothing is checked
// here: a resumed run on other data was allowed by whoever called check_resume_data.
void note_run_data(const run_plan& plan, const checkpoint_manifest* resumed);

// Nothing when the run starts afresh (plan.data.position == 0). A run that writes checkpoints
// notes its data (note_run_data).
result<std::optional<resume_point>> prepare_checkpoints(const run_plan& plan);

// A fresh checkpoint_spec::run: 16 random hex digits.
std::string new_run_name();

// The manifest after `step`: the plan at that position, the RNG states, samples and time so far,
// the data (the run's noted record, else the fingerprint of plan.data.path now; none for a
// callback) and the files (one per rank, in rank order).
checkpoint_manifest manifest_of(const run_plan& plan, std::int64_t step, std::int64_t samples,
                                double elapsed, std::vector<checkpoint_file> files);

}  // namespace pipeworks
