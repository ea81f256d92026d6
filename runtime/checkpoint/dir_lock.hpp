// An exclusive lock on a checkpoint directory for the length of a run (flock on the directory),
// so that two runs never write, prune or clear the same checkpoints at once.
#pragma once
#include <string>

#include "base/result.hpp"

namespace pipeworks {

class dir_lock {
 public:
  // Creates dir (and its parents) when missing and locks it; an error names dir when another
  // process (or another lock in this one) holds it, or when it cannot be made or opened. Where
  // the file system has no locks (some network mounts), the run goes on unlocked.
  static result<dir_lock> take(const std::string& dir);

  dir_lock(dir_lock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  dir_lock& operator=(dir_lock&& other) noexcept;
  dir_lock(const dir_lock&) = delete;
  dir_lock& operator=(const dir_lock&) = delete;
  ~dir_lock();

 private:
  explicit dir_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace pipeworks
