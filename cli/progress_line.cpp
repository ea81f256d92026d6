// The progress line on stderr; see progress_line.hpp.
#include "cli/progress_line.hpp"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace pipeworks::cli {

namespace {
using seconds = std::chrono::duration<double>;
constexpr double quiet_s = 2.0;     // short commands print nothing
constexpr double terminal_s = 0.5;  // a terminal's line is rewritten this often at most
constexpr double log_s = 5.0;       // a log gets a line this often at most
}  // namespace

progress_line::progress_line(std::string label, bool every_report)
    : label_(std::move(label)),
      every_report_(every_report),
      terminal_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

progress_line::~progress_line() {
  if (open_line_) std::fputc('\n', stderr);
}

void progress_line::report(const std::string& what, long long done, long long total) {
  const auto now = std::chrono::steady_clock::now();
  const double since_start = seconds(now - start_).count();
  const double since_last = seconds(now - last_).count();
  const bool rewrite = terminal_ && !every_report_;
  if (!every_report_) {
    if (since_start < quiet_s) return;
    if (shown_ && since_last < (rewrite ? terminal_s : log_s)) return;
  }
  last_ = now;
  shown_ = true;
  char figures[96];
  if (total > 0)
    std::snprintf(figures, sizeof figures, "%lld/%lld (%.0f s)", done, total, since_start);
  else
    std::snprintf(figures, sizeof figures, "%lld (%.0f s)", done, since_start);
  std::fprintf(stderr, "%s%s: %s %s%s", rewrite ? "\r" : "", label_.c_str(), what.c_str(), figures,
               rewrite ? "\x1b[K" : "\n");
  std::fflush(stderr);
  open_line_ = rewrite;
}

}  // namespace pipeworks::cli
