// Flag checks and options that several subcommands share: number validators with plain messages,
// the --model flag's parsing, and the --threads option.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "ops/model/model_spec.hpp"

namespace pipeworks::cli {

// CLI11 checks with a plain message: "--flag: must be a positive integer, got '0'".
extern const CLI::Validator positive_int;
extern const CLI::Validator nonnegative_int;
extern const CLI::Validator positive_number;
extern const CLI::Validator nonnegative_number;

// The model named by --model (a preset or a JSON file); throws CLI::ValidationError("--model").
model_spec parse_model_flag(const std::string& model);

// --threads: CPU threads, 0 for all cores.
void add_threads_option(CLI::App& sub, int& threads);

}  // namespace pipeworks::cli
