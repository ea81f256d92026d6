// End-to-end tests of cli/main.cpp: top-level and per-command --help, a missing or unknown
// subcommand, and unknown flags, as a user sees them (exit codes and messages).
#include <catch2/catch.hpp>

#include "run_cli.hpp"

using namespace pipeworks::cli_test;

TEST_CASE("pipeworks --help lists every subcommand", "[cli]") {
  const cli_result r = run_cli({"--help"});
  CHECK(r.exit_code == 0);
  for (const char* sub : {"schedule", "simulate", "train", "eval"}) {
    INFO(sub);
    CHECK(contains(r.out, sub));
  }
}

TEST_CASE("every subcommand's --help exits 0 and names its main flags", "[cli]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
      {"schedule", {"--schedule", "--stages", "--microbatches", "--chunks", "--replicas", "--csv"}},
      {"simulate",
       {"--schedule", "--stages", "--microbatches", "--chunks", "--replicas", "--steps", "--fwd", "--bwd",
        "--wgrad", "--costs", "--json", "--trace", "--svg", "--text"}},
      {"train",
       {"--model", "--data", "--steps", "--batch", "--lr", "--optimizer", "--seed", "--save", "--json"}},
      {"eval", {"--model", "--checkpoint", "--text", "--windows", "--json"}},
  };
  for (const auto& [sub, flags] : expected) {
    const cli_result r = run_cli({sub, "--help"});
    INFO("pipeworks " << sub << " --help\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.exit_code == 0);
    for (const auto& flag : flags) {
      INFO(flag);
      CHECK(contains(r.out, flag));
    }
  }
}

TEST_CASE("pipeworks with no subcommand exits 2 and says a subcommand is needed", "[cli]") {
  const cli_result r = run_cli({});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "subcommand"));
  CHECK(contains(r.err, "--help"));
}

TEST_CASE("pipeworks with an unknown subcommand exits 2 and names it", "[cli]") {
  const cli_result r = run_cli({"frobnicate"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "frobnicate"));  // "A subcommand is required" alone does not say what was wrong
}

TEST_CASE("an unknown flag exits 2 and names the flag, for every subcommand", "[cli]") {
  const std::vector<std::vector<std::string>> runs{
      {"schedule", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--bogus-flag"},
      {"simulate", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--bogus-flag"},
      {"train", "--model", "mlp", "--bogus-flag"},
      {"eval", "--model", "gpt-tiny", "--checkpoint", "x", "--text", "y", "--windows", "1", "--bogus-flag"},
  };
  for (const auto& args : runs) {
    const cli_result r = run_cli(args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--bogus-flag"));
  }
}

TEST_CASE("a missing required flag exits 2 and names it", "[cli]") {
  const cli_result r = run_cli({"schedule", "--stages", "2", "--microbatches", "2"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--schedule"));
}

TEST_CASE("a mistyped flag is named even when a required flag is missing with it", "[cli]") {
  const cli_result r = run_cli({"schedule", "--schedul", "1f1b", "--stages", "2", "--microbatches", "2"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "unknown flag --schedul"));
  CHECK(nonempty_lines(r.err).size() == 1);  // one line, as every error
}
