// train --metrics: the JSON lines a run writes as it goes, straight into the named regular file
// (never through a symbolic link), appended to when the run resumes.
#pragma once
#include <cstdio>
#include <string>

namespace pipeworks::cli {

class metrics_stream {
 public:
  // No path: writes nothing. Else opens path (truncating it, or appending when append), refusing
  // a symbolic link or anything but a regular file; throws pipeworks_error naming the path.
  metrics_stream(const std::string& path, bool append);
  ~metrics_stream();
  metrics_stream(const metrics_stream&) = delete;
  metrics_stream& operator=(const metrics_stream&) = delete;

  bool is_open() const { return file_ != nullptr; }
  // Writes line and a newline, flushed, so `tail -f` follows the run.
  void write_line(const std::string& line);
  // Writes the last line and closes the file; throws pipeworks_error when any write failed.
  void finish(const std::string& last_line);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
};

}  // namespace pipeworks::cli
