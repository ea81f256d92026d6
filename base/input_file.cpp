// check_input_file and read_input_text: stat, then a non-blocking open checked again with fstat
// (the path may change between the two), then a bounded read.
#include "base/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pipeworks {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

namespace {

status regular(const struct stat& st, const std::string& path, const std::string& what) {
  if (S_ISREG(st.st_mode)) return {};
  return make_error(what + " '" + path + "' is " + file_kind(st.st_mode) + ", not a regular file");
}

}  // namespace

status check_input_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error("cannot open " + what + " '" + path + "' (" + std::strerror(errno) + ")");
  return regular(st, path, what);
}

result<std::string> read_input_text(const std::string& path, std::uint64_t max_bytes,
                                    const std::string& what) {
  if (status s = check_input_file(path, what); !s) return make_error(s.message());
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open " + what + " '" + path + "' (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(regular(st, path, what).message());
  }
  auto too_big = [&](std::uint64_t n) {
    return make_error(what + " '" + path + "' is " + std::to_string(n) + " bytes, more than the " +
                      std::to_string(max_bytes) + " such a file may have; is it the right file?");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return too_big(static_cast<std::uint64_t>(st.st_size));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return make_error("cannot read " + what + " '" + path + "' (" + std::strerror(e) + ")");
    }
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::close(fd);
      return too_big(text.size() + static_cast<std::size_t>(n));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace pipeworks
