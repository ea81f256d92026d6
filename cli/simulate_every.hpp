// `pipeworks simulate --every-schedule`: every built-in schedule simulated at one p and m with the
// same work per microbatch, as one Markdown table of bubbles, activation and parameter peaks.
#pragma once
#include <string>

#include "base/result.hpp"

namespace pipeworks::cli {

// The table for p = stages and m = microbatches (both >= 1): a line saying what was simulated,
// one row per schedule kind in every_schedule_kind() order, and notes on what the columns mean.
// A schedule whose generator refuses p and m gets a note naming why instead of a row. An error,
// naming the schedule, for a simulation that fails or would not fit in memory.
result<std::string> every_schedule_table(int stages, int microbatches);

}  // namespace pipeworks::cli
