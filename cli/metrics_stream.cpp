// metrics_stream: opens with O_NOFOLLOW and checks the file is regular before the first line.
#include "cli/metrics_stream.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/result.hpp"
#include "ops/checkpoint/atomic_file.hpp"

namespace pipeworks::cli {

metrics_stream::metrics_stream(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  if (status s = check_output_target(path); !s) throw pipeworks_error("--metrics: " + s.message());
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0)
    throw pipeworks_error("--metrics: cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // replaced since it was checked
    ::close(fd);
    throw pipeworks_error("--metrics: refusing to write " + path + ": not a regular file");
  }
  file_ = ::fdopen(fd, append ? "a" : "w");
  if (file_ == nullptr) {
    ::close(fd);
    throw pipeworks_error("--metrics: cannot open " + path + ": " + std::strerror(errno));
  }
}

metrics_stream::~metrics_stream() {
  if (file_ != nullptr) std::fclose(file_);
}

void metrics_stream::write_line(const std::string& line) {
  if (file_ == nullptr) return;
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) < 0 || std::fflush(file_) != 0)
    failed_ = true;
}

void metrics_stream::finish(const std::string& last_line) {
  if (file_ == nullptr) return;
  write_line(last_line);
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !closed)
    throw pipeworks_error("writing the metrics file " + path_ + " failed (disk full?)");
}

}  // namespace pipeworks::cli
