// `pipeworks train`'s flags as a run plan: the flags build the plan (or change one read from
// --plan or a checkpoint), each plan field maps back to the flag that sets it, and the plan's
// problems are reported with flag names (exit 2).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "cli/pipeline_flags.hpp"
#include "runtime/checked_plan.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks::cli {

struct train_options {
  std::string model, data, save, metrics, optimizer = "adamw";
  std::int64_t steps = 300, batch = 16, epochs = 0, warmup = -1, sample = 200, eval_windows = 64;
  int microbatches = 1, threads = 0;
  double lr = 1e-3, min_lr_ratio = 0.1, weight_decay = -1, clip = 1.0, temperature = 0.8;
  double beta2 = 0.999;
  std::uint64_t seed = 1;
  bool json = false;
  pipeline_flags pipe;
};

// The flags that shape a run (everything but outputs and reporting).
bool shapes_the_run(std::string_view flag);

// `base` with the flags applied: every flag for a new run (all_given), else only the flags given
// on the command line (o.pipe.given). threads: the CPU threads the run may use; images: the
// training images (for --epochs; 0 for text). Throws CLI::ValidationError for a value that
// cannot be read (a bad --model, --schedule or --split).
run_plan plan_from_flags(const train_options& o, run_plan base, bool all_given, int threads,
                         std::int64_t images);

// The worker-process flags (--workers, --heartbeat-ms, ...) applied to p: all, or those given.
// --workers places the ranks anew over the workers it names.
void apply_process_flags(const train_options& o, run_plan& p, bool all_given);
// --device (every rank's device), --tf32, --bf16 and --recompute, when given, over p (a --plan
// file's too): they change where and how the run computes, not what.
void apply_device_flags(const train_options& o, run_plan& p);

// The flag that sets a plan field ("schedule.stages" -> "--stages").
std::string flag_of(std::string_view field);

// The run's one check of its plan (check_plan), for a model of `blocks` blocks: throws
// CLI::ValidationError with the plan's first problem, written with flag names.
// `schedule_file`: the --schedule-file given (named with the flag in an error about its programs).
checked_plan check_plan_flags(const run_plan& plan, int blocks, const std::string& schedule_file = "");

}  // namespace pipeworks::cli
