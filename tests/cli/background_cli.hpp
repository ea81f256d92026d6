// Test helper: starts build/bin/pipeworks in the background, so a test can wait for something it
// writes and then kill it (SIGKILL) at a moment of its choosing.
#pragma once
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "run_cli.hpp"

namespace pipeworks::cli_test {

class background_cli {
 public:
  explicit background_cli(const std::vector<std::string>& args,
                          const std::vector<std::string>& launcher = {})
      : pid_(spawn_cli(args, io_ / "stdout", io_ / "stderr", launcher)) {}
  ~background_cli() {
    if (!waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  background_cli(const background_cli&) = delete;
  background_cli& operator=(const background_cli&) = delete;

  // Polls `ready` every few milliseconds until it holds or the process ended; false on timeout.
  bool wait_for(const std::function<bool()>& ready, std::chrono::seconds limit = std::chrono::seconds(120)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (ready()) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        finish(status);
        return ready();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  // Waits up to `limit` for the process to end; whether it did.
  pid_t pid() const { return pid_; }

  bool wait_exit(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!waited_ && std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) finish(status);
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return waited_;
  }
  // What it has written to stdout and stderr so far.
  std::string output_so_far() const { return read_file(io_ / "stdout"); }
  std::string errors_so_far() const { return read_file(io_ / "stderr"); }
  void kill(int sig = SIGKILL) {
    if (!waited_) ::kill(pid_, sig);
  }
  cli_result wait() {
    if (!waited_) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0)
        if (errno != EINTR) throw std::runtime_error("waitpid failed");
      finish(status);
    }
    return result_;
  }

 private:
  void finish(int status) {
    waited_ = true;
    result_.exit_code = exit_code_of(status);
    result_.out = read_file(io_ / "stdout");
    result_.err = read_file(io_ / "stderr");
  }

  scratch_dir io_;  // first: the process writes into it
  pid_t pid_ = 0;
  bool waited_ = false;
  cli_result result_;
};

}  // namespace pipeworks::cli_test
