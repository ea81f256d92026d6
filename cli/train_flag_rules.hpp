// `pipeworks train`'s rules between flags, and between the flags and the plan they built: each
// refuses with the flag's name (CLI::ValidationError, exit 2) before any data loads or rank runs.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "cli/train_plan.hpp"
#include "ops/model/model.hpp"
#include "runtime/exec/run_api.hpp"

namespace pipeworks::cli {

// The flags alone: the pipeline, automatic-partitioning and cluster flags, and --temperature.
// It may fill in --schedule and --planner for --auto-partition (check_auto_partition_flags).
void check_flags(train_options& o);

// The flags against the plan they built: --epochs on a gpt, the gpt-only flags on an mlp, and the
// pipeline flags with --schedule none.
void check_flags_against_plan(const train_options& o, const run_plan& plan);

// A resumed run's --data naming the checkpoint's data file by another spelling (absolute for
// relative, through a symbolic link, with "..") is the checkpoint's path, compared resolved from
// the working directory; a path that resolves elsewhere stays and is refused as a difference.
void keep_checkpoint_data_path(const run_plan& saved, run_plan& given);

// Weights, the spare version, gradients and two moments, and a gpt batch copied once to split,
// against physical memory; refused naming `flag` with `hint`.
void check_train_memory(const model<float>& net, const model_spec& spec, std::int64_t batch,
                        std::int64_t microbatch, const std::string& flag, const std::string& hint);
// The plan's batch split into its microbatches (when they divide it), as check_train_memory.
void check_batch_memory(const model<float>& net, const run_plan& plan);

// Every output (--save, --metrics, --trace, its --compare-sim trace, --print-plan) against the
// others and against the inputs and the checkpoint directories (check_outputs).
void check_train_outputs(const train_options& o, const run_plan& plan);

// --epochs as steps over the training images (none for text), for a plan built from the flags;
// then a batch larger than the training images is refused.
void fit_plan_to_images(const train_options& o, std::optional<std::int64_t> images,
                        run_plan& plan);

// A resumed run's checkpoint before any rank starts: for a --plan, every file by size and sha256
// (exit 1, as a damaged file; --resume verified them as it read the plan); then each rank file's
// step, rank and plan fields against the manifest (check_rank_files) and the data against the
// checkpoint's (check_resume_data, unless --resume-on-other-data), each refused with exit 2
// naming the file or the data and what differs. --resume-on-other-data on a run that does not
// resume is refused.
void check_resumed_checkpoint(const train_options& o, const run_plan& plan);

// check_resumed_checkpoint, then the checkpoint directory a run with --save-every writes (a
// resumed run: the one it reads) is made, or probed, before the run; not for --print-plan, which
// writes none.
void check_checkpoint_dir(const train_options& o, const run_plan& plan);

// --trace and --inject-fault as the run's hooks, the fault checked against the plan.
pipeline_hooks hooks_of(const train_options& o, const run_plan& plan);

}  // namespace pipeworks::cli
