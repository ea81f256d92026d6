// Terminal progress for training: one updating line (step, loss, throughput, ETA) on a
// terminal, an occasional plain line otherwise, nothing when turned off.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace pipeworks::cli {

struct progress_state {
  std::int64_t step = 0, steps = 0;
  double loss = 0, lr = 0, samples_per_s = 0, elapsed_s = 0;
};

// "1m05s", "12s", "1h02m".
std::string format_duration(double seconds);

class progress_line {
 public:
  // mode: live on a terminal (isatty(out)), else a line every ~10% of the steps; quiet: none.
  progress_line(std::FILE* out, bool quiet);
  void update(const progress_state& s);
  // Ends the live line so later output starts on a fresh line.
  void finish();

 private:
  std::FILE* out_;
  bool live_, quiet_;
  bool open_ = false;
  double smoothed_rate_ = 0;  // samples/s, exponentially smoothed
  std::int64_t next_print_ = 1;
  double last_draw_s_ = -1;  // elapsed_s of the last redraw: at most ten a second
};

}  // namespace pipeworks::cli
