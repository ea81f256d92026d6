// CSV import and export of programs, one row per rank, cells are action strings; the format of
// PyTorch's pipelining _dump_csv / _load_csv (csv.writer rows, an empty cell is an idle slot).
#include <string>

#include "runtime/schedule.hpp"

namespace pipeworks {

std::string to_csv(const std::vector<program>& programs) {
  std::string out;
  for (const program& p : programs) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (i) out += ',';
      if (p[i].kind == action_kind::overlap_f_b && i + 2 < p.size()) {  // one cell, as PyTorch's
        out += to_string(program(p.begin() + static_cast<std::ptrdiff_t>(i),
                                 p.begin() + static_cast<std::ptrdiff_t>(i) + 3));
        i += 2;
        continue;
      }
      out += to_string(p[i]);
    }
    out += '\n';
  }
  return out;
}

std::string to_csv(const schedule& s) { return to_csv(s.programs); }

result<std::vector<program>> parse_csv(std::string_view text) {
  std::vector<program> rows;
  std::size_t pos = 0;
  int line = 0;
  int blank_lines = 0;
  // Rows end at "\n" or "\r\n" (Python's csv.writer writes "\r\n"); a final newline is optional.
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    // blank_lines: how many rows at the end so far come from blank lines.
    if (row.find_first_not_of(" \t") == std::string_view::npos)
      ++blank_lines;
    else
      blank_lines = 0;
    program prog;
    std::size_t cell_start = 0;
    int column = 0;
    while (cell_start <= row.size()) {
      std::size_t comma = row.find(',', cell_start);
      if (comma == std::string_view::npos) comma = row.size();
      std::string_view cell = row.substr(cell_start, comma - cell_start);
      ++column;
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
        cell = cell.substr(1, cell.size() - 2);
      bool blank = true;
      for (char c : cell) blank = blank && (c == ' ' || c == '\t');
      if (!blank) {
        auto a = parse_token(cell);  // an action, or (x;y)OVERLAP_F_B
        if (!a)
          return make_error("CSV line " + std::to_string(line) + ", column " +
                            std::to_string(column) + ": " + a.message());
        prog.insert(prog.end(), a->begin(), a->end());
      }
      cell_start = comma + 1;
    }
    rows.push_back(std::move(prog));
  }
  // A file that ends in blank lines ("...\n\n") has no extra ranks: drop trailing blank lines.
  // An empty rank in the middle stays, and so does a last row of empty cells (",,").
  while (!rows.empty() && rows.back().empty() && blank_lines > 0) {
    rows.pop_back();
    --blank_lines;
  }
  return rows;
}

}  // namespace pipeworks
