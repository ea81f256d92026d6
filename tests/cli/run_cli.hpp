// Test helper: runs build/bin/pipeworks with arguments and returns its exit code, stdout and
// stderr (each captured through a temporary file), plus a scratch folder removed at the end.
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/scratch_dir.hpp"

extern char** environ;

namespace pipeworks::cli_test {

inline const std::string pipeworks_binary = PIPEWORKS_BINARY_DIR "/bin/pipeworks";

struct cli_result {
  int exit_code = -1;  // the process's exit status, or 128 + signal if a signal ended it
  std::string out, err;
};

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

using scratch_dir = pipeworks::test::scratch_dir;

// Starts `pipeworks args...` with stdin from /dev/null and stdout, stderr into the given files;
// returns its process id. A `launcher` (such as {"/usr/sbin/ip", "netns", "exec", "ns1"}) runs
// first and execs pipeworks.
inline pid_t spawn_cli(const std::vector<std::string>& args, const std::string& out_path,
                       const std::string& err_path, const std::vector<std::string>& launcher = {}) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> argv_strings = launcher;
  argv_strings.push_back(pipeworks_binary);
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  const std::string program = launcher.empty() ? pipeworks_binary : launcher.front();
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("cannot start " + program);
  return pid;
}

// The exit status of a finished process: its exit code, or 128 + the signal that ended it.
inline int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `pipeworks args...` with stdin from /dev/null, and waits for it.
inline cli_result run_cli(const std::vector<std::string>& args) {
  scratch_dir io;
  const std::string out_path = io / "stdout", err_path = io / "stderr";
  const pid_t pid = spawn_cli(args, out_path, err_path);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed for " + pipeworks_binary);
  }
  cli_result r;
  r.exit_code = exit_code_of(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

// Lines of `text`, without their '\n', leaving out empty ones.
inline std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace pipeworks::cli_test
