// The flags that pick a schedule (--schedule, --stages, --microbatches, --chunks, --replicas,
// --steps, or --schedule-file and --schedule-versions), shared by `pipeworks schedule` and
// `pipeworks simulate`.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "runtime/schedule.hpp"

namespace pipeworks::cli {

struct schedule_flags {
  std::string kind;
  int stages = 0, microbatches = 0, chunks = 1, replicas = 1, steps = 1;
  std::string file, versions;  // --schedule-file, --schedule-versions
  std::string reduce = "collective";  // --reduce collective|p2p
  const CLI::Option* chunks_flag = nullptr;  // to tell a given flag from its default
  const CLI::Option* steps_flag = nullptr;
  const CLI::Option* stages_flag = nullptr;
  const CLI::Option* microbatches_flag = nullptr;
};

// Adds the flags to sub, writing into flags (which must outlive the parse).
void add_schedule_flags(CLI::App& sub, schedule_flags& flags);

// With --schedule-file: its schedule for --replicas and --steps (by default the steps the file
// covers), lowered when the file was or `lower` asks, and validated. --stages, --chunks and
// --microbatches, when given, must be the file's. Throws CLI::ValidationError naming the flag
// (exit 2) for a file that does not read, does not fit the flags or that the validator refuses
// (its message shows the grid and the stuck or wrong action).
schedule file_schedule(const schedule_flags& flags, bool lower);

// The schedule kind, after checking every flag; throws CLI::ValidationError naming the flag
// (a usage error, exit 2) for an unknown name or a count below 1.
schedule_kind checked_kind(const schedule_flags& flags);
schedule_params params_of(const schedule_flags& flags);

// Every schedule flag, as given: the prefix of a generator's error.
std::string flags_text(const schedule_flags& flags);

}  // namespace pipeworks::cli
