// parse_split: the --split flag read into boundaries (see split_flag.hpp).
#include "cli/split_flag.hpp"

#include <algorithm>
#include <charconv>
#include <string>

namespace pipeworks {

result<std::vector<int>> parse_split(std::string_view text, int blocks, int stages) {
  const std::string shown(text);
  const std::string hint =
      "give the first block of each stage, comma-separated and increasing from 0, below " +
      std::to_string(blocks) + " (for example \"0," + std::to_string(std::max(blocks / 2, 1)) +
      "\")";
  if (blocks < 1) return make_error("the model has no blocks to split");
  std::vector<int> b;
  std::size_t pos = 0;
  int index = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const std::string entry(item);
    const std::string where = "--split \"" + shown + "\": entry " + std::to_string(index + 1);
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      return make_error(where + " ('" + entry + "') is not a block number; " + hint);
    if (index == 0 && value != 0)
      return make_error(where + " is " + entry + ", but the first stage must start at block 0; " +
                        hint);
    if (index > 0 && value <= b.back())
      return make_error(where + " (" + entry + ") does not come after " + std::to_string(b.back()) +
                        ": every stage needs at least one block; " + hint);
    if (value >= blocks)
      return make_error(where + " (" + entry + ") is past the last block, " +
                        std::to_string(blocks - 1) + ": the model has " + std::to_string(blocks) +
                        " blocks; " + hint);
    b.push_back(value);
    ++index;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (stages > 0 && static_cast<int>(b.size()) != stages)
    return make_error("--split \"" + shown + "\" names " + std::to_string(b.size()) +
                      " stage(s), but the pipeline has " + std::to_string(stages) +
                      "; give one first block per stage");
  b.push_back(blocks);
  return b;
}

}  // namespace pipeworks
