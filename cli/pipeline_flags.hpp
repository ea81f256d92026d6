// `pipeworks train`'s pipeline flags (--schedule, --stages, --replicas, --chunks, --split, --trace,
// --compare-sim, --actors, --credits, --auto-partition, --cluster, --planner, --inject-fault) and
// its checkpoint and plan flags (--save-every, --checkpoint-dir, --keep, --resume, --init,
// --print-plan, --plan), and the worker-process flags (--workers, --rendezvous, --world-size,
// --heartbeat-ms, --peer-timeout-ms, --connect-timeout-ms).
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <set>
#include <string>

#include "runtime/exec/fault.hpp"

namespace pipeworks::cli {

struct pipeline_flags {
  std::string schedule = "none";
  // --schedule-file FILE [--schedule-versions sync|latest]: a schedule from a file instead.
  std::string schedule_file, schedule_versions;
  int stages = 1, replicas = 1, chunks = 1, credits = 0;
  std::string split, trace, inject_fault, actors = "detached";
  bool compare_sim = false;
  // Where every rank runs (cpu, cuda, cuda:N; a plan file can place each rank itself), and
  // whether GPU ranks' GEMMs may use TF32.
  std::string device = "cpu";
  bool tf32 = false, bf16 = false;
  std::string recompute = "none";  // --recompute none|full|selective
  int zero = 0;                    // --zero 0|1|2
  std::string reduce = "collective";  // --reduce collective|p2p
  std::string offload = "none";    // --offload optimizer,activations (GPU ranks)
  std::string memory_limit;        // --memory-limit BYTES per rank (cli/memory_limit.hpp)
  // --auto-partition [--cluster C] [--planner pipedream|2bw] (cli/auto_partition.hpp).
  bool auto_partition = false;
  std::string cluster = "local-cpu", planner;
  // Checkpoints and plans.
  std::int64_t save_every = 0;
  std::string checkpoint_dir;
  int keep = 0;
  std::string resume, init, print_plan, plan;
  bool init_partial = false;  // --init-partial: load the tensors that fit, list the others
  bool resume_on_other_data = false;  // a resumed run may train on data its checkpoint did not
  // Worker processes (--workers h1:p1,h2:p2) and failure detection.
  std::string workers, rendezvous;
  int world_size = 0;
  int heartbeat_ms = 250, peer_timeout_ms = 2000, connect_timeout_ms = 10000;
  std::string transport = "ucx";
  std::set<std::string> given;  // the flags given on the command line ("--stages", ...)
};

void add_pipeline_flags(CLI::App& sub, pipeline_flags& flags);
void add_checkpoint_flags(CLI::App& sub, pipeline_flags& flags);
void add_process_flags(CLI::App& sub, pipeline_flags& flags);

// The checks that need nothing but the flags (--compare-sim needs --trace and a schedule; --plan
// and --resume cannot be combined), so a command can refuse them before it loads data or
// profiles. Throws CLI::ValidationError naming the flag.
void check_pipeline_flags(const pipeline_flags& flags);

// "exception@1B3", "nan@0F2:1", "kill@1F0" (KIND@ACTION[:REPLICA]); throws CLI::ValidationError.
fault_injection parse_fault(const std::string& text);

}  // namespace pipeworks::cli
