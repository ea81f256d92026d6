// The --split flag: the first block of each stage, read into a split's boundaries with errors
// that name the bad entry.
#pragma once
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace pipeworks {

// "0,3,6" (the first block of each stage) for a model of `blocks` blocks → boundaries
// {0, 3, 6, blocks}. An error that names the bad entry: not starting at 0, not increasing, past
// the last block, or a count other than `stages` (when stages > 0).
result<std::vector<int>> parse_split(std::string_view text, int blocks, int stages = 0);

}  // namespace pipeworks
