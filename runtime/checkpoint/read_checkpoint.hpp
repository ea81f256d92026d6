// Reading a checkpoint of a directory that a run may be pruning meanwhile (checkpoint.keep): a
// checkpoint pruned while it was read is read again at the newest one, never reported as damaged.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "base/result.hpp"
#include "runtime/checkpoint/manifest.hpp"

namespace pipeworks {

// The checkpoint a reader is given: its step, its step directory and its manifest (as
// read_checked_manifest reads it).
struct chosen_checkpoint {
  std::int64_t step = 0;
  std::string dir;  // step_dir(the checkpoint directory, step)
  checkpoint_manifest manifest;
};

// What read_checkpoint read: the checkpoint, and read's status on it. That status is an error
// only while the checkpoint is still there: its files are damaged, not pruned.
struct checkpoint_read {
  chosen_checkpoint checkpoint;
  status read;
};

// How many checkpoints in a row may be pruned under a reader before it gives up.
inline constexpr int max_pruned_rereads = 16;

// Calls read on the checkpoint of `step` in dir, or on the newest complete one when step < 0.
// Pruning removes a checkpoint's manifest, durably, before any of its files, and never the
// newest complete checkpoint; so when read fails (a file missing, say) and the manifest is gone
// too, the checkpoint was pruned while it was read: with step < 0, read is called again on the
// newest complete checkpoint then; with a step given, the error says it was pruned. When the
// manifest is still there, read's error is the checkpoint's own and comes back in
// checkpoint_read::read. Errors: latest_complete's and read_checked_manifest's, a step pruned,
// and max_pruned_rereads prunings in a row.
//
// No lock: the run writing dir holds its dir_lock exclusively for the whole run, so a shared lock
// on it would wait for the run to end; and a lock per step would let a slow or stopped reader
// hold up the run's pruning (and the manifests queued behind it), or make the run skip pruning
// and keep more than checkpoint.keep. The manifest's absence after a failure tells a pruned
// checkpoint from a damaged one without making the run wait for readers.
result<checkpoint_read> read_checkpoint(const std::string& dir, std::int64_t step,
                                        const std::function<status(const chosen_checkpoint&)>& read);

}  // namespace pipeworks
