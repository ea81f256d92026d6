// Text timeline: paints each compute event onto the columns it overlaps, keeping per column the
// event that covers most of it; one rank at a time, with the width clamped to 1..10000.
#include "runtime/trace_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace pipeworks {
namespace {

char cell_char(const action& a) {
  const int k = a.microbatch >= 0 ? a.microbatch % 26 : 0;
  switch (a.kind) {
    case action_kind::forward: return static_cast<char>('A' + k);
    case action_kind::backward:
    case action_kind::input_grad: return static_cast<char>('a' + k);
    case action_kind::weight_grad: return '+';
    case action_kind::reduce: return 'R';
    case action_kind::step: return 'S';
    default: return '?';
  }
}

// The exact column count when every compute event lies on a grid of its shortest duration and
// fits in `width` columns; 0 otherwise.
int exact_columns(const timeline& t, double makespan, int width) {
  double unit = 0.0;
  for (const auto& e : t.events) {
    const double d = e.end - e.start;
    if (e.stream == stream_kind::compute && d > 0 && (unit == 0.0 || d < unit)) unit = d;
  }
  if (unit <= 0.0) return 0;
  const auto on_grid = [unit](double x) {
    return std::abs(x / unit - std::round(x / unit)) < 1e-6;
  };
  for (const auto& e : t.events)
    if (e.stream == stream_kind::compute && !(on_grid(e.start) && on_grid(e.end))) return 0;
  if (!on_grid(makespan)) return 0;
  const double cols = std::round(makespan / unit);
  return cols <= width ? static_cast<int>(cols) : 0;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", s);
  return buf;
}

}  // namespace

std::string to_text(const timeline& t, int width) {
  width = std::clamp(width, 1, max_text_width);
  int ranks = t.ranks;
  for (const auto& e : t.events) ranks = std::max(ranks, e.rank + 1);
  const double makespan = t.makespan();

  const int exact = exact_columns(t, makespan, width);
  const int cols = exact > 0 ? exact : (makespan > 0 ? width : 0);
  const double dt = cols > 0 ? makespan / cols : 0.0;

  // The compute events of each rank, so that one row of per-column sums is live at a time.
  std::vector<std::vector<const timeline_event*>> of_rank(ranks);
  for (const auto& e : t.events) {
    if (cols == 0 || e.stream != stream_kind::compute || e.end <= e.start || e.rank < 0) continue;
    of_rank[e.rank].push_back(&e);
  }
  // Per column: the character of the event that covers most of it, and how much of the column
  // is busy.
  std::vector<std::string> rows(ranks, std::string(cols, '.'));
  std::vector<double> best(cols), busy(cols);
  for (int r = 0; r < ranks; ++r) {
    std::fill(best.begin(), best.end(), 0.0);
    std::fill(busy.begin(), busy.end(), 0.0);
    for (const timeline_event* e : of_rank[r]) {
      const int first =
          std::clamp(static_cast<int>(std::floor(e->start / dt + 1e-9)), 0, cols - 1);
      const int last =
          std::clamp(static_cast<int>(std::ceil(e->end / dt - 1e-9)) - 1, 0, cols - 1);
      for (int c = first; c <= last; ++c) {
        const double overlap = std::min(e->end, (c + 1) * dt) - std::max(e->start, c * dt);
        if (overlap <= 0) continue;
        busy[c] += overlap;
        if (overlap > best[c]) {
          best[c] = overlap;
          rows[r][c] = cell_char(e->act);
        }
      }
    }
    for (int c = 0; c < cols; ++c)
      if (busy[c] < 0.5 * dt - 1e-12) rows[r][c] = '.';
  }

  const int p = t.devices_per_replica > 0 ? t.devices_per_replica : std::max(ranks, 1);
  const bool replicated = ranks > p;
  std::string out;
  if (!t.title.empty()) out += t.title + "\n";
  for (int r = 0; r < ranks; ++r) {
    char label[48];
    if (replicated)
      std::snprintf(label, sizeof label, "rank %-3d (r%d d%d) |", r, r / p, r % p);
    else
      std::snprintf(label, sizeof label, "rank %-3d |", r);
    out += label + rows[r] + "|\n";
  }
  out += "F: A-Z, B/I: a-z (microbatch mod 26), W: +, REDUCE: R, STEP: S, idle: .; 1 column = ";
  out += exact > 0 ? format_seconds(dt) + " (exact)" : format_seconds(dt);
  out += ", makespan " + format_seconds(makespan) + "\n";
  return out;
}

}  // namespace pipeworks
