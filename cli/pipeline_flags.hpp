// `pipeworks train`'s pipeline flags (--schedule, --stages, --replicas, --chunks, --split, --trace,
// --compare-sim, --actors, --auto-partition, --cluster, --planner, --inject-fault) and checks.
#pragma once
#include <CLI/CLI.hpp>

#include <set>
#include <string>

#include "actors/pipeline.hpp"
#include "ops/model/model.hpp"

namespace pipeworks::cli {

struct pipeline_flags {
  std::string schedule = "none";
  int stages = 1, replicas = 1, chunks = 1, credits = 0;
  std::string split, trace, inject_fault, actors = "detached";
  bool compare_sim = false;
  // --auto-partition [--cluster C] [--planner pipedream|2bw] (cli/auto_partition.hpp).
  bool auto_partition = false;
  std::string cluster = "local-cpu", planner;
  std::set<std::string> given;  // the flags given on the command line ("--stages", ...)
};

void add_pipeline_flags(CLI::App& sub, pipeline_flags& flags);

// The checks that need nothing but the flags (--compare-sim needs --trace and a schedule), so a
// command can refuse them before it loads data or profiles; make_pipeline_options runs them too.
// Throws CLI::ValidationError naming the flag.
void check_pipeline_flags(const pipeline_flags& flags);

// The options for train_pipeline, after checking every flag against the model and the batch;
// throws CLI::ValidationError naming the flag. threads: all CPU threads the run may use.
pipeline_options make_pipeline_options(const pipeline_flags& flags, const model<float>& net,
                                       int microbatches, std::int64_t batch, int threads);

// "exception@1B3", "nan@0F2:1", "kill@1F0" (KIND@ACTION[:REPLICA]); throws CLI::ValidationError.
fault_injection parse_fault(const std::string& text);

}  // namespace pipeworks::cli
