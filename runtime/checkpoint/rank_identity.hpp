// The plan fields a rank file's state depends on (model, schedule, optimizer, the rank's stages,
// split, microbatch size), written into its metadata, and the check, before any rank runs, that
// each rank file of a checkpoint is of that checkpoint's plan, rank and step.
#pragma once
#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {

// Rank r's identity under `plan` (resolved: its split filled in), as metadata:
//   pipeworks.model       the model spec as JSON          pipeworks.schedule   "1f1b", "none", ...
//   pipeworks.optimizer   "sgd" or "adamw"                pipeworks.stages     [0, 4]: its virtual stages
//   pipeworks.split       [0, 3, 6]: each stage's first block
//   pipeworks.microbatch  samples per microbatch (data.batch / (replicas x microbatches))
// The step and the rank are the file's "pipeworks.rank_state" metadata's own.
metadata_map rank_identity(const run_plan& plan, int rank);

// The metadata of a safetensors file, reading its header only; errors name the file.
result<metadata_map> read_rank_metadata(const std::string& path);

// A rank file's metadata against the checkpoint: its rank and step (pipeworks.rank_state) against
// the manifest's entry and step, and each field of rank_identity(plan, rank) against the file's.
// The error names the file, the field, both values and what it means ("rank-1.safetensors is of
// step 10, but the manifest is of step 15: a rank file of another checkpoint").
status check_rank_metadata(const metadata_map& md, const std::string& path,
                           const checkpoint_manifest& m, const run_plan& plan, int rank);

// check_rank_metadata for every file of the checkpoint in step_dir that is on this machine (one in
// a directory local to another host is checked by the process that reads it), in rank order; the
// manifest's plan is parsed here. The first failure.
status check_rank_files(const checkpoint_manifest& m, const std::string& step_dir);

}  // namespace pipeworks
