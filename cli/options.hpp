// Flag checks and options that several subcommands share: number validators with plain messages,
// the --model flag's parsing, and the --threads option.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/model/model.hpp"
#include "ops/model/model_spec.hpp"

namespace pipeworks::cli {

// CLI11 checks with a plain message: "--flag: must be a positive integer, got '0'".
// A seed: a whole number in 0..2^64-1, digits only (no sign, nothing that wraps).
extern const CLI::Validator seed_value;
// --threads: 0 (all cores) to max_threads; more is a typo, not a machine.
inline constexpr int max_threads = 4096;
extern const CLI::Validator thread_count;
extern const CLI::Validator positive_int;
extern const CLI::Validator nonnegative_int;
extern const CLI::Validator positive_number;
extern const CLI::Validator nonnegative_number;

// The model named by --model (a preset or a JSON file); throws CLI::ValidationError("--model").
model_spec parse_model_flag(const std::string& model);

// Throws CLI::ValidationError(flag) when the parameters (param_copies times: weights, gradients,
// optimizer state), the activations of samples_per_pass samples and data_bytes of input data
// exceed physical memory. The message names the need, the memory and the hint.
void check_memory(const model<float>& net, int param_copies, std::int64_t samples_per_pass,
                  double data_bytes, const std::string& flag, const std::string& hint);

// Throws CLI::ValidationError(flag) unless a file can be created at path: its directory exists
// and is writable, and path is absent or a regular file (not a directory, a symbolic link, a
// device or a pipe; see check_output_target). Run before the work that ends in the write.
void check_output_path(const std::string& path, const std::string& flag);

// A path and the flag that gave it.
struct flag_path {
  std::string path;
  std::string flag;
};

// check_output_path for every output given (empty paths are skipped); then throws
// CLI::ValidationError when two outputs name the same file (the later write would replace the
// earlier), an output names one of the inputs (it would destroy them), or an output lies inside
// one of the input directories (a checkpoint directory: it could replace a checkpoint's file),
// naming both flags.
void check_outputs(const std::vector<flag_path>& outputs, const std::vector<flag_path>& inputs,
                   const std::vector<flag_path>& input_dirs = {});

// --threads: CPU threads, 0 for all cores.
void add_threads_option(CLI::App& sub, int& threads);

// Throws CLI::ValidationError naming the first flag or argument of `app` (and of the subcommands
// parsed under it) given an empty value: no flag takes "" (`--save ""` would write nothing,
// `--data ""` read the default, `--split ""` mean no split).
void refuse_empty_values(const CLI::App& app);

}  // namespace pipeworks::cli
