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
  explicit background_cli(const std::vector<std::string>& args) {
    const std::string out_path = io_ / "stdout", err_path = io_ / "stderr";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv_strings{pipeworks_binary};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int spawned = posix_spawn(&pid_, pipeworks_binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) throw std::runtime_error("cannot start " + pipeworks_binary);
  }
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
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result_.out = read_file(io_ / "stdout");
    result_.err = read_file(io_ / "stderr");
  }

  scratch_dir io_;
  pid_t pid_ = 0;
  bool waited_ = false;
  cli_result result_;
};

}  // namespace pipeworks::cli_test
