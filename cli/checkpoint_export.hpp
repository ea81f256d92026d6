// `pipeworks checkpoint export DIR --out FILE`: the whole model of a checkpoint (every stage's
// latest weights, under Hugging Face names) as one safetensors file, as `train --save` writes it.
#pragma once
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace pipeworks::cli {

struct export_options {
  std::string dir;         // the checkpoint directory (holding step-NNNNNNNN/)
  std::int64_t step = -1;  // -1: the newest complete checkpoint
  std::string out;         // the safetensors file to write
};

// Adds `export` under the checkpoint command, filling o.
CLI::App* add_export_subcommand(CLI::App& checkpoint, export_options& o);

// Exit code: 0 written; 1 a damaged or unreadable checkpoint (nothing written).
int run_export(const export_options& o);

}  // namespace pipeworks::cli
