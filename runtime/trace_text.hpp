// A text timeline for terminals: one row per rank, time in columns, one character per cell.
#pragma once
#include <string>

#include "runtime/timeline.hpp"

namespace pipeworks {

// Renders the compute stream of every rank, at most `width` columns wide:
//   F of microbatch k: 'A' + k % 26     B or I of microbatch k: 'a' + k % 26
//   W: '+'   REDUCE: 'R'   STEP: 'S'   idle: '.'
// When every compute event starts and ends on a multiple of one time unit (the shortest event)
// and the makespan fits in `width` units, each column is exactly one unit. Otherwise each column
// is makespan / width long and shows the action that fills most of it, or '.' when the column
// is mostly idle. A title line comes first and a legend line with the column length last.
// `width` is clamped to 1..max_text_width.
constexpr int max_text_width = 10000;
std::string to_text(const timeline& t, int width = 100);

}  // namespace pipeworks
