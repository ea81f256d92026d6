// dir_lock: flock(LOCK_EX | LOCK_NB) on an O_DIRECTORY descriptor, released when it closes.
#include "runtime/checkpoint/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace pipeworks {

result<dir_lock> dir_lock::take(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error("cannot create checkpoint directory " + dir + ": " + ec.message());
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return make_error("cannot open checkpoint directory " + dir + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == ENOLCK || e == EOPNOTSUPP || e == EINVAL) return dir_lock(fd);  // no locks here
    ::close(fd);
    if (e == EWOULDBLOCK)
      return make_error("checkpoint directory " + dir + " is in use by another run (it holds the "
                        "directory's lock); wait until that run ends, or choose another directory");
    return make_error("cannot lock checkpoint directory " + dir + ": " + std::strerror(e));
  }
  return dir_lock(fd);
}

dir_lock& dir_lock::operator=(dir_lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

dir_lock::~dir_lock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace pipeworks
