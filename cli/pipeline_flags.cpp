// The pipeline flags of `pipeworks train`: parsing, checks with messages that name the flag.
#include "cli/memory_limit.hpp"
#include "cli/pipeline_flags.hpp"

#include <algorithm>

#include "cli/options.hpp"
#include "ops/device/device.hpp"
#include "runtime/offload_mode.hpp"

namespace pipeworks::cli {

void add_pipeline_flags(CLI::App& sub, pipeline_flags& f) {
  sub.add_option("--schedule", f.schedule,
                 "none (one device, gradient accumulation), gpipe, 1f1b, interleaved, zb-h1, "
                 "zb-h2, bfs, zbv, v-half, v-min, dualpipev, pipedream, pipedream-vs, 2bw or "
                 "cyclic")
      ->capture_default_str();
  CLI::Option* file =
      sub.add_option("--schedule-file", f.schedule_file,
                     "train with the schedule in a file instead of --schedule: PyTorch "
                     "pipelining's CSV (compute_only or compute_comms: one pipeline for one step, "
                     "repeated every step with REDUCE and STEP added, synchronous versions) or "
                     "pipeworks' action text (`pipeworks schedule` output); it sets --stages, "
                     "--chunks and --microbatches, and the plan carries the programs");
  sub.add_option("--schedule-versions", f.schedule_versions,
                 "with --schedule-file: sync (step t uses version t; the default without STEPs "
                 "in the file) or latest (each F the newest version; the default for action "
                 "text with STEPs); overrides the file's \"# versions:\" line")
      ->check(CLI::IsMember({"sync", "latest"}))
      ->needs(file);
  sub.add_option("--stages", f.stages, "pipeline stages p (devices; a device is a CPU core here)")
      ->check(positive_int)
      ->capture_default_str();
  sub.add_option("--replicas", f.replicas, "data-parallel replicas w of every stage")
      ->check(positive_int)
      ->capture_default_str();
  sub.add_option("--chunks", f.chunks, "virtual stages per device v (interleaved, bfs; 2 for zbv, v-half, v-min and "
                 "dualpipev)")
      ->check(positive_int)
      ->capture_default_str();
  sub.add_option("--device", f.device,
                 "where every rank runs: cpu, cuda (GPU 0) or cuda:N (a --plan file can place "
                 "each rank on its own device, e.g. stage 0 on the CPU and the rest on a GPU)")
      ->check([](const std::string& s) {
        auto d = parse_device(s);
        return d ? std::string() : d.message();
      })
      ->capture_default_str();
  sub.add_flag("--tf32", f.tf32,
               "GPU ranks' matrix products may use TF32 tensor cores (faster, about 1e-3 "
               "relative error instead of fp32's 1e-6)");
  sub.add_flag("--bf16",
               f.bf16,
               "GPU ranks' linear layers multiply bf16 copies of their operands, accumulating in "
               "fp32; weights, gradients, optimizer and the other ops stay fp32 (about 1e-2 "
               "relative error; attention as with --tf32)");
  sub.add_option("--recompute", f.recompute,
                 "what each stage keeps from a forward for its backward: none (every activation), "
                 "full (only the stage's input; the backward runs the forward again first, on "
                 "the same weights: least memory, about a third more compute) or selective (each "
                 "GPT block drops its attention probabilities and GELU output and makes them "
                 "again); the weights are the same bit for bit in every mode")
      ->check(CLI::IsMember({"none", "full", "selective"}))
      ->capture_default_str();
  sub.add_option("--zero", f.zero,
                 "ZeRO over each stage's replicas (needs --replicas 2 or more): 1, each replica "
                 "keeps and updates the optimizer moments of about 1/w of the stage's tensors, "
                 "then every replica gathers the updated tensors; 2, the reduced gradient is also "
                 "only its own tensors' sums (reduce-scatter). 0: every replica keeps everything. "
                 "The weights are the same bit for bit at every level")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  sub.add_option("--reduce", f.reduce,
                 "how a stage's replicas combine their gradients: collective (an all-reduce every "
                 "replica reaches before any goes on) or p2p (with --schedule cyclic: a chain of "
                 "partial sums, each replica's sent to the next at its own time; the last replica "
                 "updates the stage alone, holding its optimizer moments alone, and sends the new "
                 "version to the others, which take it where they first need it). The weights "
                 "are the same bit for bit")
      ->check(CLI::IsMember({"collective", "p2p"}))
      ->capture_default_str();
  sub.add_option("--offload", f.offload,
                 "what GPU ranks keep in page-locked host memory instead of the GPU's: optimizer "
                 "(the optimizer moments, which the GPU updates there over the bus), activations "
                 "(the stashes of microbatches in flight, between their forward and backward), "
                 "both as optimizer,activations, or none. The same bits either way. Refused on "
                 "CPU ranks, whose memory is host memory already")
      ->check([](const std::string& s) {
        return parse_offload(s) ? std::string()
                                : "'" + s + "' is not none, optimizer, activations or "
                                  "optimizer,activations";
      })
      ->capture_default_str();
  sub.add_option("--memory-limit", f.memory_limit,
                 "the most bytes one rank may hold (e.g. 512M, 2G): before anything trains, each "
                 "rank's predicted peak (weights and their versions, gradients, optimizer moments, "
                 "stashed activations) is checked against it, and a rank that does not fit is "
                 "refused with what --recompute, --zero or (GPU ranks) --offload would make it")
      ->check([](const std::string& s) {
        auto b = parse_bytes(s);
        return b ? std::string() : b.message();
      });
  sub.add_option("--split", f.split,
                 "first block of each (virtual) stage, e.g. 0,3,6 (default: even FLOPs)");
  sub.add_option("--trace", f.trace, "write the run's Chrome trace (Perfetto) to this file");
  sub.add_flag("--compare-sim", f.compare_sim,
               "profile each stage, simulate the schedule with those costs, print measured "
               "against simulated makespan and write both traces (needs --trace)");
  sub.add_option("--actors", f.actors,
                 "detached: each stage actor on its own thread; pooled: on CAF's scheduler")
      ->check(CLI::IsMember({"detached", "pooled"}))
      ->capture_default_str();
  sub.add_option("--credits", f.credits,
                 "messages in flight per link (0: the smallest window the schedule allows)")
      ->check(nonnegative_int)
      ->capture_default_str();
  sub.add_flag("--auto-partition", f.auto_partition,
               "profile the model, plan stages and replicas for --cluster, print the plan and "
               "run it (each rank on one thread, throttled to its device's speed; not with "
               "--threads)");
  sub.add_option("--cluster", f.cluster,
                 "with --auto-partition: local-cpu, or cluster.json with a \"devices\" list of "
                 "speeds <= 1 (fractions of one core here)")
      ->capture_default_str();
  sub.add_option("--planner", f.planner,
                 "with --auto-partition: pipedream (default; keeps --batch) or 2bw (chooses "
                 "p, w, m and the microbatch; default with --schedule 2bw), or v (the V "
                 "schedules' split and device count; default with zbv, v-half, v-min or "
                 "dualpipev; keeps --batch and --microbatches)")
      ->check(CLI::IsMember({"pipedream", "2bw", "v"}));
  sub.add_option("--inject-fault", f.inject_fault,
                 "test only: KIND@ACTION[:REPLICA] with KIND exception, nan or kill")
      ->group("");  // hidden from --help
}

fault_injection parse_fault(const std::string& text) {
  const auto at = text.find('@');
  auto bad = [&](const std::string& why) {
    return CLI::ValidationError("--inject-fault", "'" + text + "': " + why +
                                                      " (expected KIND@ACTION[:REPLICA], e.g. "
                                                      "exception@1B3 or kill@0F2:1)");
  };
  if (at == std::string::npos) throw bad("no '@'");
  fault_injection f;
  const std::string kind = text.substr(0, at);
  if (kind == "exception") f.kind = fault_kind::exception;
  else if (kind == "nan") f.kind = fault_kind::nan;
  else if (kind == "kill") f.kind = fault_kind::kill;
  else throw bad("unknown kind '" + kind + "'");
  std::string rest = text.substr(at + 1);
  if (const auto colon = rest.find(':'); colon != std::string::npos) {
    const std::string r = rest.substr(colon + 1);
    if (r.empty() || r.find_first_not_of("0123456789") != std::string::npos)
      throw bad("the replica '" + r + "' is not a number");
    if (r.size() > 6)
      throw bad("the replica " + r + " is out of range: replicas are numbered from 0 to "
                "--replicas - 1");
    f.replica = std::stoi(r);
    rest = rest.substr(0, colon);
  }
  auto a = parse_action(rest);
  if (!a) throw bad(a.message());
  f.at = *a;
  return f;
}

void add_checkpoint_flags(CLI::App& sub, pipeline_flags& f) {
  sub.add_option("--save-every", f.save_every,
                 "write a checkpoint every N steps into --checkpoint-dir (each rank its own file, "
                 "the manifest last; asynchronous schedules are not drained)")
      ->check(nonnegative_int);
  sub.add_option("--checkpoint-dir", f.checkpoint_dir,
                 "where --save-every's checkpoints go (DIR/step-NNNNNNNN/); a new run refuses a "
                 "directory that holds checkpoints");
  sub.add_option("--keep", f.keep, "keep the newest K complete checkpoints (0: all)")
      ->check(nonnegative_int);
  sub.add_option("--resume", f.resume,
                 "continue the run whose checkpoints are in DIR from its latest complete one, bit "
                 "for bit (its plan; flags that would change the results are refused; data other "
                 "than the checkpoint's is refused)");
  sub.add_flag("--resume-on-other-data", f.resume_on_other_data,
               "a resumed run (--resume, or a --plan with data.position) goes on although its "
               "data is not the checkpoint's (another path, size or sha256); its new "
               "checkpoints record the data it replaced");
  sub.add_option("--init", f.init,
                 "start a new run from these weights: a safetensors file (such as --save writes) "
                 "or a checkpoint directory (its latest checkpoint); refused unless every tensor "
                 "fits the model");
  sub.add_flag("--init-partial", f.init_partial,
               "with --init (or a plan's init.from): load only the tensors that fit the model, "
               "like load_state_dict(strict=False); the others keep their seeded values, and both "
               "are listed");
  sub.add_option("--print-plan", f.print_plan,
                 "write the run plan (JSON; with --auto-partition, after profiling and planning) "
                 "to FILE and exit");
  sub.add_option("--plan", f.plan, "run the plan in FILE (as --print-plan writes it)");
}

void add_process_flags(CLI::App& sub, pipeline_flags& f) {
  sub.add_option("--workers", f.workers,
                 "run the ranks on these worker processes (HOST:PORT,HOST:PORT,...; each started "
                 "with `pipeworks worker --listen HOST:PORT`); the ranks go to them in contiguous "
                 "blocks unless the plan places them");
  sub.add_option("--rendezvous", f.rendezvous,
                 "instead of --workers: wait at HOST:PORT for --world-size workers started by a "
                 "launcher (torchrun, srun) to join (`pipeworks worker` with --driver HOST:PORT, "
                 "or MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set); worker RANK k is process "
                 "k + 1");
  sub.add_option("--world-size", f.world_size, "with --rendezvous: how many workers join");
  sub.add_option("--heartbeat-ms", f.heartbeat_ms,
                 "with --workers: every process sends its peers a heartbeat this often")
      ->capture_default_str();
  sub.add_option("--peer-timeout-ms", f.peer_timeout_ms,
                 "with --workers: a peer silent this long (frozen, or its network gone) is lost "
                 "and the run stops, naming it")
      ->capture_default_str();
  sub.add_option("--transport", f.transport,
                 "with --workers: how tensors cross processes: ucx (UCX beside CAF's control "
                 "messages: shared memory on one host, TCP across hosts) or caf (inside CAF's "
                 "messages)")
      ->check(CLI::IsMember({"ucx", "caf"}))
      ->capture_default_str();
  sub.add_option("--connect-timeout-ms", f.connect_timeout_ms,
                 "with --workers: the most that reaching a worker and its handshake may take")
      ->capture_default_str();
}

void check_pipeline_flags(const pipeline_flags& f) {
  if (f.given.count("--workers") && f.workers.find_first_not_of(" \t,") == std::string::npos)
    throw CLI::ValidationError("--workers", "names no worker (an empty variable?); give "
                                            "HOST:PORT,HOST:PORT,..., or leave --workers out to "
                                            "run every rank in this process");
  if (f.given.count("--workers") && f.given.count("--rendezvous"))
    throw CLI::ValidationError("--rendezvous", "--workers names the workers and --rendezvous waits "
                                               "for workers to join: give one of them");
  // How processes talk means nothing when every rank is in this one (a plan may name workers).
  // (A plan written with --print-plan may be run later with --workers.)
  if (!f.given.count("--workers") && !f.given.count("--rendezvous") && f.plan.empty() &&
      f.resume.empty() && f.print_plan.empty())
    for (const char* flag : {"--transport", "--heartbeat-ms", "--peer-timeout-ms", "--connect-timeout-ms"})
      if (f.given.count(flag))
        throw CLI::ValidationError(flag, std::string("concerns processes that talk, and without "
                                                     "--workers (or --rendezvous) every rank runs in "
                                                     "this process: drop ") + flag);
  if (f.compare_sim && f.trace.empty())
    throw CLI::ValidationError("--compare-sim", "--compare-sim writes two traces: give --trace FILE");
  if (f.compare_sim && f.schedule == "none" && f.schedule_file.empty() && f.plan.empty() &&
      f.resume.empty())
    throw CLI::ValidationError("--compare-sim", "--schedule none has no schedule to simulate");
  if (!f.plan.empty() && !f.resume.empty())
    throw CLI::ValidationError("--plan", "--resume DIR runs the checkpoint's own plan: drop --plan");
  if (!f.init.empty() && !f.resume.empty())
    throw CLI::ValidationError("--init", "--resume continues from the checkpoint's weights: drop "
                                         "--init (use --init to start a new run from them)");
  if (f.auto_partition && f.given.count("--device"))
    throw CLI::ValidationError("--device", "--auto-partition places the ranks on the devices its "
                                           "--cluster names: drop --device");
}

}  // namespace pipeworks::cli
