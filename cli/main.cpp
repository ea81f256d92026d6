// pipeworks: the command-line entry point. Parses the subcommand and turns errors into exit codes.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "cli/command.hpp"
#include "ops/cpu_threads.hpp"
#include "base/result.hpp"

namespace pipeworks::cli {

static std::vector<command>& registry() {
  static std::vector<command> r;
  return r;
}

bool register_command(std::string name, std::string help, command_setup setup) {
  registry().push_back({std::move(name), std::move(help), std::move(setup)});
  return true;
}

const std::vector<command>& commands() { return registry(); }

}  // namespace pipeworks::cli

int main(int argc, char** argv) {
  using namespace pipeworks;
  reexec_without_openblas_coretype(argv);

  CLI::App app{"pipeworks: pipeline-parallel training of neural networks on the actor model"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipeworks 0.1.0");
  std::map<CLI::App*, cli::command_runner> runners;
  for (const auto& c : cli::commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners[sub] = c.setup(*sub);
  }
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const auto& c : cli::commands()) {
      known += (known.empty() ? "" : ", ") + c.name;
      found = found || c.name == argv[1];
    }
    if (!found) {
      std::cerr << "pipeworks: unknown command '" << argv[1] << "'; known commands: " << known
                << ".\nRun 'pipeworks --help' for usage.\n";
      return cli::exit_usage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "pipeworks: " << e.what() << "\n"
              << "Run 'pipeworks --help' or 'pipeworks <command> --help' for usage.\n";
    return cli::exit_usage;
  }
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const CLI::ParseError& e) {
      std::cerr << "pipeworks " << sub->get_name() << ": " << e.what() << "\n";
      return cli::exit_usage;
    } catch (const std::exception& e) {
      std::cerr << "pipeworks " << sub->get_name() << ": error: " << e.what() << "\n";
      return cli::exit_failure;
    }
  }
  return cli::exit_usage;
}
