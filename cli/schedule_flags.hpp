// The flags that pick a schedule (--schedule, --stages, --microbatches, --chunks, --replicas,
// --steps), shared by `pipeworks schedule` and `pipeworks simulate`.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "runtime/schedule.hpp"

namespace pipeworks::cli {

struct schedule_flags {
  std::string kind;
  int stages = 0, microbatches = 0, chunks = 1, replicas = 1, steps = 1;
};

// Adds the six flags to sub, writing into flags (which must outlive the parse).
void add_schedule_flags(CLI::App& sub, schedule_flags& flags);

// The schedule kind, after checking every flag; throws CLI::ValidationError naming the flag
// (a usage error, exit 2) for an unknown name or a count below 1.
schedule_kind checked_kind(const schedule_flags& flags);
schedule_params params_of(const schedule_flags& flags);

// Every schedule flag, as given: the prefix of a generator's error.
std::string flags_text(const schedule_flags& flags);

}  // namespace pipeworks::cli
