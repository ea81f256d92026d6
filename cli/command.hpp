// The CLI's subcommand registry: each cli/cmd_*.cpp registers itself with a static
// `const bool registered = register_command(...)`, so main.cpp never changes.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace pipeworks::cli {

// Runs the parsed subcommand and returns the process exit code.
using command_runner = std::function<int()>;
// Adds the subcommand's options to `sub` and returns the function that runs it.
using command_setup = std::function<command_runner(CLI::App& sub)>;

struct command {
  std::string name;
  std::string help;
  command_setup setup;
};

bool register_command(std::string name, std::string help, command_setup setup);
const std::vector<command>& commands();

// Exit codes shared by every subcommand.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;  // the run failed (bad data, lost peer, NaN, ...)
inline constexpr int exit_usage = 2;    // a bad flag or value
// Stopped by a signal (Ctrl-C, SIGTERM, SIGHUP): 128 + its number by convention (130, 143, 129).
inline constexpr int exit_interrupted(int sig) { return 128 + sig; }

}  // namespace pipeworks::cli
