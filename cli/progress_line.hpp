// A progress line on stderr for long commands: quiet for the first seconds, then a line that
// rewrites itself on a terminal (or a line every few seconds in a log); every report on demand.
#pragma once
#include <chrono>
#include <string>

namespace pipeworks::cli {

class progress_line {
 public:
  // `label` starts each line ("pipeworks plan"); `every_report` prints each report at once.
  progress_line(std::string label, bool every_report);
  ~progress_line();  // ends a rewritten line with a newline
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

  // "<what> <done>/<total>" (or "<what> <done>" when total is 0), with the seconds so far.
  void report(const std::string& what, long long done, long long total);

 private:
  std::string label_;
  bool every_report_, terminal_;
  bool open_line_ = false;  // a rewritten line waits for its newline
  std::chrono::steady_clock::time_point start_, last_;
  bool shown_ = false;
};

}  // namespace pipeworks::cli
