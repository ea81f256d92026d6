// The progress line: a carriage-return redraw on a terminal, periodic lines in a log.
#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace pipeworks::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

progress_line::progress_line(std::FILE* out, bool quiet)
    : out_(out), live_(isatty(fileno(out)) != 0), quiet_(quiet) {}

void progress_line::update(const progress_state& s) {
  if (quiet_) return;
  smoothed_rate_ =
      smoothed_rate_ == 0 ? s.samples_per_s : 0.8 * smoothed_rate_ + 0.2 * s.samples_per_s;
  const double per_step = s.step > 0 ? s.elapsed_s / static_cast<double>(s.step) : 0;
  const double eta = per_step * static_cast<double>(s.steps - s.step);
  const double pct = s.steps > 0 ? 100.0 * static_cast<double>(s.step) / s.steps : 100.0;
  char line[256];
  std::snprintf(line, sizeof line,
                "step %lld/%lld (%3.0f%%)  loss %.4f  lr %.2e  %.0f samples/s  elapsed %s  eta %s",
                static_cast<long long>(s.step), static_cast<long long>(s.steps), pct, s.loss, s.lr,
                smoothed_rate_, format_duration(s.elapsed_s).c_str(), format_duration(eta).c_str());
  if (live_) {
    if (s.step < s.steps && last_draw_s_ >= 0 && s.elapsed_s - last_draw_s_ < 0.1) return;
    last_draw_s_ = s.elapsed_s;
    std::fprintf(out_, "\r\033[K%s", line);
    open_ = true;
  } else if (s.step >= next_print_ || s.step == s.steps) {
    std::fprintf(out_, "%s\n", line);
    next_print_ = s.step + std::max<std::int64_t>(1, s.steps / 10);
  }
  std::fflush(out_);
}

void progress_line::finish() {
  if (open_) std::fprintf(out_, "\n");
  open_ = false;
  std::fflush(out_);
}

}  // namespace pipeworks::cli
