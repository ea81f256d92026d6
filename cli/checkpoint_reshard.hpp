// `pipeworks checkpoint reshard DIR --out NEWDIR [--stages P] [--replicas W] [--zero N] ...`: a
// checkpoint taken at a step boundary, re-cut by layer for another layout (ZeRO sharding
// included), written as a new checkpoint directory that `train --resume NEWDIR` continues bit
// for bit.
#pragma once
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace pipeworks::cli {

struct reshard_options {
  std::string dir;         // the checkpoint directory read
  std::int64_t step = -1;  // -1: its newest complete checkpoint
  std::string out;         // the new checkpoint directory (must hold no checkpoint)
  // The new layout; each unset keeps the checkpoint's.
  std::string schedule, split;
  int stages = 0, chunks = 0, replicas = 0, microbatches = 0;
  int zero = -1;  // ZeRO stage 0-2; -1: the checkpoint's (0 when the new layout has one replica)
  // An asynchronous schedule's checkpoint: restart the pipeline at its step from each stage's
  // newest weights, dropping what was in flight (runtime/exec/restart_async.hpp).
  bool restart_pipeline = false;
};

// Adds `reshard` under the checkpoint command, filling o.
CLI::App* add_reshard_subcommand(CLI::App& checkpoint, reshard_options& o);

// Exit code: 0 written; 1 a damaged checkpoint or one with work in flight; 2 a bad layout.
int run_reshard(const reshard_options& o);

}  // namespace pipeworks::cli
