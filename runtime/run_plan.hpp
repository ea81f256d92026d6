// run_plan: everything one training run does, as one plain value: the model, the schedule, the
// split, each rank's placement, the optimizer and lr schedule, the data, credits, threads and
// checkpoints. Built once (from flags, library options or a planner), checked once, written and
// read as JSON; rank_setup (runtime/rank_setup.hpp) derives what each rank needs from it.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "ops/device/device.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/train/trainer_config.hpp"
#include "runtime/offload_mode.hpp"
#include "runtime/recompute_mode.hpp"
#include "runtime/schedule.hpp"
#include "runtime/schedule_file.hpp"

namespace pipeworks {

enum class planner_kind { pipedream, two_bw, v };
std::string planner_name(planner_kind k);  // "pipedream", "2bw", "v"
result<planner_kind> parse_planner_kind(std::string_view name);

// The slowest device a rank may be throttled to: a millionth of a core (the plan's speeds are in
// [min_rank_speed, 1]).
constexpr double min_rank_speed = 1e-6;

// Where a rank runs. A device of speed s < 1 is throttled to s of one core (runtime/exec).
// process 0 is the driver's own; process k >= 1 is the worker processes.workers[k - 1]. The device
// is parsed where the plan is read (JSON, flags, a cluster): a typed value from there on.
struct rank_placement {
  named_device device;  // cpu unless named
  double speed = 1.0;
  std::string name;  // the cluster's name for the device, for people ("" when none)
  int process = 0;
  bool operator==(const rank_placement&) const = default;
};

enum class data_source { callback, text, fashion_mnist };
std::string_view data_source_name(data_source s);  // "callback", "text", "fashion-mnist"

struct data_spec {
  // callback: the embedding program supplies minibatches; text or fashion-mnist: read from path.
  data_source source = data_source::callback;
  std::string path;
  std::int64_t batch = 16;    // samples per optimizer step (all replicas together)
  std::uint64_t seed = 1;     // the data order: step t's minibatch is a function of (seed, t)
  std::int64_t position = 0;  // the first step this run trains (its steps done so far)
  bool operator==(const data_spec&) const = default;
};

struct checkpoint_spec {
  std::int64_t every = 0;  // steps between checkpoints; 0: none
  std::string dir;         // where they go (DIR/step-NNNNNNNN/)
  int keep = 0;            // complete checkpoints to keep; 0: all
  // The run's name in workers' own checkpoint directories (WORKER_DIR/run-<run>/step-N/): 16 hex
  // digits, given when a run with workers starts and kept by its resumed runs; "" otherwise.
  std::string run;
  bool operator==(const checkpoint_spec&) const = default;
};

// The processes a run spans besides the driver's, and how their failures are detected.
struct process_spec {
  std::vector<std::string> workers;  // "host:port" of each worker; process k is workers[k - 1]
  int heartbeat_ms = 250;            // every process sends a heartbeat to its peers this often
  int timeout_ms = 2000;             // a peer silent this long is lost (frozen, or its network)
  int connect_ms = 10000;            // the most a connection and its handshake may take
  // Started by a launcher (torchrun, srun): the workers join at this "host:port" of the driver's
  // and give their addresses, which then fill `workers` ("" when the workers are listed).
  std::string rendezvous;
  int world_size = 0;  // how many workers join there
  // How tensors cross processes: "ucx" (beside small CAF messages, over UCX: shared memory on one
  // host, TCP across hosts) or "caf" (inside CAF's messages, for builds or hosts without UCX).
  std::string transport = "ucx";
  bool operator==(const process_spec&) const = default;
};

// The run asks the partition actor to profile the model and plan stages and replicas itself.
struct auto_partition_spec {
  planner_kind planner = planner_kind::pipedream;
  std::string cluster = "local-cpu";  // a preset or a cluster.json path
  bool keep_batch = false;            // 2bw: the plan's batch must equal data.batch
  bool keep_microbatches = false;     // pipedream: keep schedule.microbatches (else 2 per device)
  bool choose_recompute = false;      // profile every recompute mode; the planner picks the run's
  bool operator==(const auto_partition_spec&) const = default;
};

struct run_plan {
  model_spec model;
  // The schedule; nullopt is `none`: one device, gradient accumulation over m microbatches.
  std::optional<schedule_kind> schedule = schedule_kind::one_f_one_b;
  int stages = 1;    // p
  int chunks = 1;    // v: virtual stages per device
  int replicas = 1;  // w
  // How a stage's replicas combine gradients: the collective all-reduce, or cyclic's chain of
  // point-to-point partial sums (reduce_mode, runtime/schedule.hpp); the same bits either way.
  reduce_mode reduce = reduce_mode::collective;
  // A schedule from a file (train --schedule-file): its rows as pipeworks' action text
  // (runtime/schedule_file.hpp), which plan_schedule (runtime/plan_schedule.hpp) makes into the
  // run's programs, so that workers and resumed runs need no file; "" for the built-in kind.
  // `schedule` then holds a stand-in for the rules that follow from the kind: gpipe (a flush
  // schedule) with sync versions, pipedream (latest version, per-stage clipping) with latest.
  std::string programs;
  version_mode programs_versions = version_mode::sync;
  // Optimizer, lr schedule and clipping. train.steps is the run's total steps and
  // train.microbatches is m, per replica and step.
  train_config train;
  // The first block of each virtual stage ({0, 3, 6}); empty until resolved: an even split of the
  // FLOPs, or the planner's.
  std::vector<int> split;
  // Per rank (replica * stages + device); empty: every rank on a CPU core at speed 1.
  std::vector<rank_placement> ranks;
  data_spec data;
  std::uint64_t init_seed = 1;  // the initial weights, unless init_from names a file
  std::string init_from;        // a safetensors file or a checkpoint directory ("" for none)
  int credits = 0;              // messages in flight per link; 0: the smallest safe window
  int threads_per_stage = 1;    // oneTBB threads of each rank's kernels
  bool detached = true;         // stage actors on threads of their own (else CAF's scheduler)
  checkpoint_spec checkpoint;
  std::int64_t weights_every = 0;  // ranks send their weights to the driver every k steps; 0: never
  bool tf32 = false;  // GPU ranks' GEMMs may use TF32 tensor cores (about 1e-3 relative error)
  bool bf16 = false;  // GPU ranks' linear layers multiply in bf16, fp32 elsewhere (about 1e-2)
  recompute_mode recompute = recompute_mode::none;  // what a stage keeps for its backward
  // ZeRO over each stage's replicas (DeepSpeed's stage numbers): 0 none; 1 each replica keeps and
  // updates the optimizer moments of the tensors it owns, then the tensors are gathered; 2 also
  // the reduced gradient is only its own tensors'. The same bits as 0 either way.
  int zero = 0;
  // What GPU ranks keep in page-locked host memory instead of the device's (runtime/offload_mode):
  // it moves bytes, never changes them, so the weights are the same bit for bit with or without
  // it (and a resume may change it). Refused when any rank is on the CPU, whose memory is host
  // memory already.
  offload_spec offload;
  // The bytes of tensors (and host optimizer moments) one rank may hold; 0: no limit. Checked
  // against the prediction before the run (train --memory-limit) and enforced by each CPU rank's
  // memory account as it allocates.
  std::int64_t memory_limit = 0;
  std::optional<auto_partition_spec> auto_partition;
  process_spec processes;

  int virtual_stages() const { return stages * chunks; }
  // The stages the model is cut into ({split}'s entries): the virtual stages of one route
  // (dualpipe's two routes hold every stage twice).
  int model_stages() const { return schedule ? virtual_stages() / routes() : virtual_stages(); }
  // The schedule's routes: the kind's (2 for dualpipe), or with programs from a file the text's
  // (a line "# routes: 2" at its head, as to_programs_text writes it).
  int routes() const;
  int rank_count() const { return schedule ? stages * replicas : 1; }
  // The clip scope the schedule allows: global for `none` and flush schedules (the squared norms
  // of all stages are summed before STEP), per stage for the asynchronous ones.
  bool clips_globally() const { return !schedule || is_flush(*schedule); }
};

// A problem with a plan: the field it is about ("schedule.stages") and a sentence whose other
// fields are written {like.this}, so a program can name them its own way (the CLI as flags).
struct plan_issue {
  std::string field;
  std::string text;
};
using field_namer = std::function<std::string(std::string_view field)>;
// "field: text" with every {field} replaced by name(field).
std::string render(const plan_issue& issue, const field_namer& name);

// The first problem with the plan, or nothing: every rule a run needs, in one place. It lowers
// the schedule to check the credit window. `blocks`: the model's block count (-1: from
// plan.model).
std::optional<plan_issue> first_issue(const run_plan& plan, int blocks = -1);
// first_issue rendered with the plan's own field names; ok when there is none.
status check(const run_plan& plan, int blocks = -1);

// JSON: every field required, unknown fields refused, each error naming the field and `source`.
// The plan read is checked (first_issue) with `blocks` (-1: the plan's model's).
std::string to_json_text(const run_plan& plan);
result<run_plan> parse_run_plan(std::string_view text, const std::string& source, int blocks = -1);
// A plan file: parse_run_plan, and it must name its model, and a data.position above 0 needs the
// checkpoint.dir it resumes.
result<run_plan> load_run_plan(const std::string& path);

// Gives every rank a process when the plan has workers and names none: the ranks, in order
// (replica * p + device), in contiguous blocks over the workers, so that a replica's stages share
// a worker where they can and replicas land on different ones. Ranks must be known (resolved).
void place_ranks(run_plan& plan);
// The ranks (replica * p + device) in process k.
std::vector<int> ranks_in_process(const run_plan& plan, int process);

// The fields whose values change what a run computes (model, schedule, split, optimizer, lr,
// clip, data, init): the first field in which a and b differ, or "" when none does. Resume
// refuses a plan that differs from its checkpoint's in one of them.
std::string first_result_difference(const run_plan& a, const run_plan& b);

// The plan a resumed run follows: `saved` (the checkpoint's, resolved) with what `given` may
// change without changing the results (credits, threads, actors, weights_every, checkpoint
// interval and keep). An error names the first field in which `given` differs from `saved` in a
// way that would change the results; a `given` that asks for automatic partitioning, or leaves
// the split to an even split, takes the checkpoint's partitioning. With other_data (the user's
// --resume-on-other-data) `given` may name another data.path, which the run then reads.
result<run_plan> resume_plan(const run_plan& saved, const run_plan& given, bool other_data = false);

}  // namespace pipeworks
