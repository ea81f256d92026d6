// pipeworks: the command-line entry point. Parses the subcommand and turns errors into exit codes.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "runtime/transport/ucx_transport.hpp"
#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"
#include "base/exception_text.hpp"
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

// What to lower when a command runs out of memory.
static std::string memory_hint(const std::string& command) {
  if (command == "train")
    return "lower --batch, raise --microbatches or --stages, or use a smaller --model";
  if (command == "eval") return "lower --batch or --windows";
  if (command == "profile") return "lower --microbatch";
  if (command == "plan") return "use a smaller --cluster or --devices";
  if (command == "schedule" || command == "simulate")
    return "lower --stages, --microbatches, --chunks, --replicas or --steps";
  return "give this process more memory";
}

}  // namespace pipeworks::cli

int main(int argc, char** argv) {
  using namespace pipeworks;
  run_with_best_blas_kernels(argv);

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
                << "; run 'pipeworks --help' for usage.\n";
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
    // One line, as every other error: what was wrong, then where the usage is.
    const std::string cmd = argc > 1 && argv[1][0] != '-' ? std::string(argv[1]) : std::string();
    // A mistyped flag ("--schedul") is what went wrong, whether CLI11 names the required flag it
    // failed to give or lists it among the arguments it did not expect (with its value).
    std::string what = e.what();
    const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;  // named by its app
    CLI::App* command = nullptr;  // the command named on the line
    for (CLI::App* s : app.get_subcommands({})) command = s->get_name() == cmd ? s : command;
    // A value that does not convert (a number past its type, a word for a number): name the
    // flag, the value and what the flag takes.
    if (dynamic_cast<const CLI::ConversionError*>(&e) && !cmd.empty()) {
      const std::string head = "Could not convert: ";
      const auto eq = what.find(" = ");
      if (what.rfind(head, 0) == 0 && eq != std::string::npos) {
        const std::string flag = what.substr(head.size(), eq - head.size());
        std::string type;
        if (command)
          if (const CLI::Option* opt = command->get_option_no_throw(flag)) type = opt->get_type_name();
        what = flag + ": " + what.substr(eq + 3) + " is not a value it takes" +
               (type.empty() ? "" : " (" + type + ", a number within its type's range)");
      }
    }
    // A command of commands (checkpoint) given none, or one it does not have: name them.
    if (command && what.find("A subcommand is required") != std::string::npos) {
      std::string known;
      for (const CLI::App* c : command->get_subcommands({}))
        known += (known.empty() ? "" : ", ") + c->get_name();
      what = argc > 2 && argv[2][0] != '-'
                 ? "unknown " + cmd + " command '" + argv[2] + "'; known: " + known
                 : "needs a command: " + known;
    }
    if ((e.get_name() == "RequiredError" || extras) && !cmd.empty()) {
      std::string unknown;
      for (CLI::App* sub : app.get_subcommands())
        for (const std::string& a : sub->remaining())
          if (unknown.empty() && a.size() > 1 && a[0] == '-') unknown = a.substr(0, a.find('='));
      // Extras are the parent's: the first argument that looks like a flag the command lacks.
      CLI::App* sub = command;
      // A command of commands: its flags are the parsed command's (checkpoint reshard's).
      while (sub && !sub->get_subcommands().empty()) sub = sub->get_subcommands().front();
      if (unknown.empty() && sub)
        for (int i = 2; i < argc && unknown.empty(); ++i) {
          const std::string a = argv[i];
          if (a.size() < 2 || a[0] != '-' || a == "--") continue;
          if (!sub->get_option_no_throw(a.substr(0, a.find('=')))) unknown = a.substr(0, a.find('='));
        }
      if (!unknown.empty()) what = "unknown flag " + unknown + " (mistyped?)";
    }
    std::cerr << "pipeworks" << (cmd.empty() ? "" : " " + cmd) << ": " << what
              << "; run 'pipeworks " << (cmd.empty() ? "" : cmd + " ") << "--help' for usage.\n";
    return cli::exit_usage;
  }
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    // UCX's transports end here, their threads joined, not beside static destruction at exit.
    struct end_transports {
      ~end_transports() { ucx_transport::end_process_transports(); }
    } at_the_end;
    try {
      cli::refuse_empty_values(*sub);
      return run();
    } catch (const CLI::ParseError& e) {
      std::cerr << "pipeworks " << sub->get_name() << ": " << e.what() << "\n";
      return cli::exit_usage;
    } catch (const std::exception& e) {
      // Out of memory here, or in a thread that reported it: say so, and what to lower.
      std::string text = exception_text(e);
      if (text.find("out of memory: an allocation failed") != std::string::npos)
        text += "; " + cli::memory_hint(sub->get_name());
      std::cerr << "pipeworks " << sub->get_name() << ": error: " << text << "\n";
      return cli::exit_failure;
    }
  }
  return cli::exit_usage;
}
