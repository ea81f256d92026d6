// The run plan's rules: first_issue checks every field a run depends on, in one place, and says
// what to change; render names the fields; first_result_difference compares two plans.
#include "runtime/run_plan.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/host_port.hpp"
#include "runtime/lower.hpp"
#include "runtime/plan_schedule.hpp"
#include "runtime/program_walk.hpp"
#include "runtime/validate.hpp"

namespace pipeworks {
namespace {

std::string num(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}
std::string str(std::int64_t x) { return std::to_string(x); }

plan_issue issue(std::string field, std::string text) { return {std::move(field), std::move(text)}; }

// A schedule from a file (schedule.programs): it reads, it fits the plan's shape, and one
// repetition of it passes the validator (deadlocks, sends, backwards before forwards, versions).
std::optional<plan_issue> check_programs(const run_plan& p) {
  if (p.programs.empty()) return std::nullopt;
  if (!p.schedule)
    return issue("schedule.programs", "is set, but {schedule.kind} is none (one device)");
  if (p.auto_partition)
    return issue("auto_partition", "chooses a built-in schedule itself, and {schedule.programs} "
                                   "gives the programs: drop one of the two");
  auto f = parse_schedule_file(p.programs);
  if (!f) return issue("schedule.programs", f.message());
  auto shape = shape_of(*f, p.replicas);
  if (!shape) return issue("schedule.programs", shape.message());
  auto differs = [&](const char* field, const char* what, std::int64_t plan, std::int64_t file) {
    return issue(field, "is " + str(plan) + ", but {schedule.programs} has " + str(file) + " " +
                            what + "; drop it, or give " + str(file));
  };
  if (shape->stages != p.stages) return differs("schedule.stages", "devices", p.stages, shape->stages);
  if (shape->chunks != p.chunks)
    return differs("schedule.chunks", "virtual stages per device", p.chunks, shape->chunks);
  // Two routes (dualpipe) run half the step's microbatches each.
  if (shape->microbatches * f->routes != p.train.microbatches)
    return differs("schedule.microbatches", "microbatches per step", p.train.microbatches,
                   shape->microbatches * f->routes);
  if (p.train.steps % shape->steps != 0)
    return issue("schedule.steps", "is " + str(p.train.steps) + ", not a multiple of the " +
                                       str(shape->steps) + " steps {schedule.programs} covers");
  auto s = plan_schedule(p, 0);
  if (!s) return issue("schedule.programs", s.message());
  if (status ok = validate(*s); !ok)
    return issue("schedule.programs", "do not make a valid schedule: " + ok.message());
  return std::nullopt;
}

std::optional<plan_issue> check_schedule_shape(const run_plan& p) {
  if (p.stages < 1) return issue("schedule.stages", "must be at least 1 (got " + str(p.stages) + ")");
  if (p.chunks < 1) return issue("schedule.chunks", "must be at least 1 (got " + str(p.chunks) + ")");
  if (p.replicas < 1)
    return issue("schedule.replicas", "must be at least 1 (got " + str(p.replicas) + ")");
  if (p.train.microbatches < 1)
    return issue("schedule.microbatches",
                 "must be at least 1 (got " + str(p.train.microbatches) + ")");
  if (p.train.steps < 1) return issue("schedule.steps", "must be at least 1 (got " + str(p.train.steps) + ")");
  if (p.train.steps > (std::int64_t{1} << 30))
    return issue("schedule.steps", "must be at most 2^30 (got " + str(p.train.steps) + ")");
  return check_programs(p);
}

std::optional<plan_issue> check_train(const run_plan& p) {
  const train_config& t = p.train;
  if (!std::isfinite(t.optim.lr) || !(t.optim.lr > 0))
    return issue("optimizer.lr", "must be a positive number (got " + num(t.optim.lr) + ")");
  if (!std::isfinite(t.min_lr) || t.min_lr < 0 || t.min_lr > t.optim.lr)
    return issue("lr_schedule.min_lr", "must be between 0 and {optimizer.lr} " + num(t.optim.lr) +
                                           " (got " + num(t.min_lr) + ")");
  if (t.warmup_steps < 0 || t.warmup_steps >= t.steps)
    return issue("lr_schedule.warmup_steps", "must be at least 0 and smaller than {schedule.steps} " +
                                                 str(t.steps) + " (got " + str(t.warmup_steps) + ")");
  if (!std::isfinite(t.clip_grad_norm) || t.clip_grad_norm < 0)
    return issue("clip.max_norm", "must be 0 (off) or positive (got " + num(t.clip_grad_norm) + ")");
  if (!std::isfinite(t.optim.weight_decay) || t.optim.weight_decay < 0)
    return issue("optimizer.weight_decay", "must be 0 or positive (got " + num(t.optim.weight_decay) + ")");
  if (t.optim.weight_decay > 1)
    return issue("optimizer.weight_decay", "must be in [0, 1] (got " + num(t.optim.weight_decay) +
                                               "); typical values are 0 to 0.1");
  // Every field the plan writes is bounded, whichever optimizer reads it: a plan is one value, and
  // one that switches kind must still make sense.
  for (auto [field, v] : {std::pair{"optimizer.momentum", t.optim.momentum},
                          {"optimizer.beta1", t.optim.beta1},
                          {"optimizer.beta2", t.optim.beta2}})
    if (!(v >= 0 && v < 1))
      return issue(field, "must be in [0, 1) (got " + num(v) + "); 0.9 is usual for momentum and "
                          "beta1, 0.999 for beta2");
  if (!(t.optim.eps > 0 && t.optim.eps < 1))
    return issue("optimizer.eps", "must be in (0, 1) (got " + num(t.optim.eps) + "); 1e-08 is usual");
  if (status s = validate(t); !s) return issue("optimizer", s.message());
  return std::nullopt;
}

std::optional<plan_issue> check_data(const run_plan& p) {
  const data_spec& d = p.data;
  const std::int64_t parts = static_cast<std::int64_t>(p.train.microbatches) * p.replicas;
  if (d.batch < 1) return issue("data.batch", "must be at least 1 (got " + str(d.batch) + ")");
  if (d.batch % parts != 0)
    return issue("data.batch", str(d.batch) + " is not divisible by {schedule.microbatches} x " +
                                   "{schedule.replicas} = " + str(parts));
  if (d.position < 0 || d.position > p.train.steps)
    return issue("data.position", "must be in 0..{schedule.steps} " + str(p.train.steps) +
                                      " (got " + str(d.position) + ")");
  if (d.source == data_source::text) {
    if (!p.model.is_gpt()) return issue("data.source", "text data trains a gpt, not " + p.model.name);
  } else if (d.source == data_source::fashion_mnist) {
    if (p.model.is_gpt() || p.model.mlp().inputs != 784 || p.model.mlp().classes != 10)
      return issue("data.source", "Fashion-MNIST trains an mlp with 784 inputs and 10 classes, not " +
                                      p.model.name);
  }
  if (d.source != data_source::callback && d.path.empty())
    return issue("data.path", "names no file or directory to read the " +
                                  std::string(data_source_name(d.source)) + " data from");
  return std::nullopt;
}

std::optional<plan_issue> check_single_device(const run_plan& p) {
  if (p.stages != 1 || p.chunks != 1 || p.replicas != 1 || !p.split.empty())
    return issue("schedule.kind", "none runs on one device without actors; pick a schedule (e.g. "
                                  "1f1b) to use {schedule.stages}, {schedule.replicas}, "
                                  "{schedule.chunks} or {split}");
  if (p.auto_partition)
    return issue("auto_partition", "plans a pipeline: give a pipeline {schedule.kind} (e.g. 1f1b or 2bw)");
  if (p.ranks.size() > 1 || (p.ranks.size() == 1 && p.ranks[0].speed != 1.0))
    return issue("ranks", "throttled device speeds need a pipeline schedule");
  if (p.recompute != recompute_mode::none)
    return issue("runtime.recompute", "recomputes a pipeline stage's stash from its input, and "
                                      "none has one stage holding every block's: pick a schedule "
                                      "(e.g. 1f1b) with {schedule.stages} of 2 or more, or drop it");
  if (p.zero > 0)
    return issue("runtime.zero", "shards the optimizer state over a stage's replicas, and none "
                                 "runs one replica on one device: pick a schedule (e.g. 1f1b) "
                                 "with {schedule.replicas} of 2 or more, or drop it");
  return std::nullopt;
}

std::optional<plan_issue> check_split(const run_plan& p, int blocks) {
  const int V = p.model_stages();
  const std::string what = V == p.virtual_stages()
                               ? " virtual stages ({schedule.stages} x {schedule.chunks})"
                               : " stages of the model (each held twice, one per route)";
  if (blocks < V)
    return issue("schedule.stages", str(V) + what + " but the model has only " + str(blocks) +
                                        " blocks");
  if (p.split.empty()) return std::nullopt;
  if (static_cast<int>(p.split.size()) != V)
    return issue("split", "names " + str(static_cast<std::int64_t>(p.split.size())) +
                              " first blocks, but there are " + str(V) + what);
  if (p.split[0] != 0) return issue("split", "must start at block 0");
  for (std::size_t i = 1; i < p.split.size(); ++i)
    if (p.split[i] <= p.split[i - 1])
      return issue("split", "must increase: entry " + str(static_cast<std::int64_t>(i)) + " (" +
                                str(p.split[i]) + ") is not after " + str(p.split[i - 1]));
  if (p.split.back() >= blocks)
    return issue("split", "its last first block " + str(p.split.back()) +
                              " is past the model's last block " + str(blocks - 1));
  return std::nullopt;
}

std::optional<plan_issue> check_ranks(const run_plan& p) {
  if (p.ranks.empty()) return std::nullopt;
  const int n = p.stages * p.replicas;
  if (static_cast<int>(p.ranks.size()) != n)
    return issue("ranks", "gives " + str(static_cast<std::int64_t>(p.ranks.size())) +
                              " placements, but there are " + str(n) +
                              " ranks ({schedule.stages} x {schedule.replicas})");
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const rank_placement& rp = p.ranks[r];
    const std::string at = "ranks[" + str(static_cast<std::int64_t>(r)) + "]";
    if (!(rp.speed >= min_rank_speed && rp.speed <= 1.0))
      return issue(at + ".speed", "is " + num(rp.speed) + ", not in [" + num(min_rank_speed) +
                                      ", 1]: give the device's speed as a share of one core of "
                                      "this machine (1 is a full core)");
    if (rp.device.on_gpu() && rp.speed != 1.0)
      return issue(at + ".speed", "is " + num(rp.speed) + " on " + rp.device.to_string() +
                                      ": a GPU rank runs at its own speed, 1");
    const auto workers = static_cast<int>(p.processes.workers.size());
    if (rp.process < 0 || rp.process > workers)
      return issue(at + ".process",
                   "is " + str(rp.process) + ", but the run has " + str(workers) +
                       " worker process" + (workers == 1 ? "" : "es") +
                       " ({processes.workers}); 0 is the driver's process, k is worker k");
  }
  return std::nullopt;
}

std::optional<plan_issue> check_auto_partition(const run_plan& p) {
  if (p.stages != 1 || p.replicas != 1 || p.chunks != 1 || !p.split.empty() || !p.ranks.empty())
    return issue("auto_partition", "chooses the stages, replicas and split: leave "
                                   "{schedule.stages}, {schedule.replicas}, {schedule.chunks}, "
                                   "{split} and {ranks} unset");
  if (p.auto_partition->planner == planner_kind::two_bw && *p.schedule != schedule_kind::two_bw)
    return issue("auto_partition.planner", "2bw plans for {schedule.kind} 2bw, not " +
                                               std::string(schedule_name(*p.schedule)));
  if ((p.auto_partition->planner == planner_kind::v) != v_planned(*p.schedule))
    return issue("auto_partition.planner",
                 "v plans the V schedules (zbv, v-half, v-min, dualpipev) and dualpipe, and they "
                 "need it: "
                 "{schedule.kind} " + std::string(schedule_name(*p.schedule)) + " with planner " +
                     planner_name(p.auto_partition->planner));
  if (p.auto_partition->cluster.empty())
    return issue("auto_partition.cluster", "names no cluster (local-cpu or a cluster.json)");
  return std::nullopt;
}

std::optional<plan_issue> check_runtime(const run_plan& p) {
  if (p.threads_per_stage < 1)
    return issue("runtime.threads_per_stage", "must be at least 1 (got " + str(p.threads_per_stage) + ")");
  if (p.credits < 0)
    return issue("runtime.credits", "must be 0 (the smallest safe window) or positive (got " +
                                        str(p.credits) + ")");
  if (p.weights_every < 0)
    return issue("runtime.weights_every", "must be 0 (never) or positive (got " + str(p.weights_every) + ")");
  const checkpoint_spec& c = p.checkpoint;
  if (c.every < 0)
    return issue("checkpoint.every", "must be 0 (no checkpoints) or positive (got " + str(c.every) + ")");
  if (c.keep < 0) return issue("checkpoint.keep", "must be 0 (keep all) or positive (got " + str(c.keep) + ")");
  if (c.every > 0 && c.dir.empty())
    return issue("checkpoint.dir", "names no directory for the checkpoints {checkpoint.every} asks for");
  if (c.every > 0 && p.data.position == 0 && c.every >= p.train.steps)
    return issue("checkpoint.every", "is " + str(c.every) + ", not below {schedule.steps} " +
                                         str(p.train.steps) + ", so no checkpoint would be written "
                                         "(one is taken after every multiple below the last step; "
                                         "the final weights go to --save)");
  if (c.every == 0 && c.keep > 0 && p.data.position == 0)
    return issue("checkpoint.keep", "is " + str(c.keep) + ", but {checkpoint.every} is 0: there "
                                        "are no checkpoints to keep; say how often to save");
  if (c.every == 0 && !c.dir.empty() && p.data.position == 0)  // resumed: the dir read from
    return issue("checkpoint.every", "is 0, so nothing would be written to {checkpoint.dir} " + c.dir +
                                         "; say how often to save");
  if (p.zero < 0 || p.zero > 2)
    return issue("runtime.zero", "is " + str(p.zero) + "; known: 0 (no sharding), 1 (optimizer "
                                 "moments) and 2 (moments and the reduced gradient)");
  if (!c.run.empty() && (c.run.size() != 16 || c.run.find_first_not_of("0123456789abcdef") != std::string::npos))
    return issue("checkpoint.run", "must be 16 lowercase hexadecimal digits (or absent), not \"" +
                                       c.run.substr(0, 40) + "\"");
  return std::nullopt;
}

// The lowered schedule's smallest safe credit window, against runtime.credits.
std::optional<plan_issue> check_credits(const run_plan& p) {
  if (p.credits == 0) return std::nullopt;
  auto made = plan_schedule(p, static_cast<int>(p.train.steps));
  if (!made) return issue(p.programs.empty() ? "schedule.kind" : "schedule.programs", made.message());
  const int need = min_credit_window(*made);
  if (p.credits < need)
    return issue("runtime.credits", "a window of " + str(p.credits) +
                                        " deadlocks this schedule: it needs at least " + str(need) +
                                        " messages in flight per link (0 picks it)");
  return std::nullopt;
}

// The p2p reduce is cyclic data parallelism's chain over a stage's replicas (reduce_mode).
std::optional<plan_issue> check_reduce(const run_plan& p) {
  if (p.reduce != reduce_mode::p2p) return std::nullopt;
  if (p.schedule != schedule_kind::cyclic || !p.programs.empty() || p.replicas < 2)
    return issue("schedule.reduce", "is p2p, cyclic data parallelism's chain of partial sums from "
                                    "one replica to the next: it needs {schedule.kind} cyclic "
                                    "and {schedule.replicas} 2 or more; drop it (collective)");
  if (p.zero > 0)
    return issue("schedule.reduce", "is p2p, whose last replica updates each stage alone and so "
                                    "holds its optimizer moments alone, and {runtime.zero} shards "
                                    "them over every replica, whose owners would all meet at one "
                                    "moment again: use one or the other");
  return std::nullopt;
}

// Offload moves a GPU rank's bytes to host memory: a CPU rank has nothing to move them to.
std::optional<plan_issue> check_offload(const run_plan& p) {
  if (!p.offload.any()) return std::nullopt;
  const std::string what = offload_name(p.offload);
  if (p.auto_partition)
    return issue("runtime.offload", "is " + what + ", but {auto_partition} places the ranks on its "
                                    "cluster's devices, CPU threads here, whose memory is host "
                                    "memory already: drop {runtime.offload}, or drop "
                                    "{auto_partition} and place the ranks on a GPU yourself");
  auto device_of = [&](int r) {
    const bool placed = static_cast<std::size_t>(r) < p.ranks.size();
    return placed ? p.ranks[static_cast<std::size_t>(r)].device : named_device{};
  };
  auto rank = [&](int r) {
    return "rank " + str(r) + " (stage " + str(r % p.stages) + ", replica " + str(r / p.stages) + ")";
  };
  for (int r = 0; r < p.rank_count(); ++r)
    if (!device_of(r).on_gpu())
      return issue("runtime.offload",
                   "is " + what + ", but " + rank(r) + " runs on the CPU, whose memory is host "
                   "memory already: there is nothing to offload it to. Drop {runtime.offload}, or "
                   "place the rank on a GPU ({ranks[" + str(r) + "].device} cuda or cuda:N)");
  if (!p.schedule && p.offload.activations)
    return issue("runtime.offload", "is " + what + ", but with {schedule.kind} none each "
                                    "microbatch's backward follows its forward at once: no stash "
                                    "waits to be moved. Drop activations from {runtime.offload}, "
                                    "or pick a pipeline schedule (e.g. 1f1b)");
  return std::nullopt;
}

}  // namespace

std::string planner_name(planner_kind k) {
  return k == planner_kind::two_bw ? "2bw" : k == planner_kind::v ? "v" : "pipedream";
}

result<planner_kind> parse_planner_kind(std::string_view name) {
  if (name == "pipedream") return planner_kind::pipedream;
  if (name == "2bw") return planner_kind::two_bw;
  if (name == "v") return planner_kind::v;
  return make_error("unknown planner '" + std::string(name) + "' (pipedream, 2bw or v)");
}

std::string_view data_source_name(data_source s) {
  switch (s) {
    case data_source::callback: return "callback";
    case data_source::text: return "text";
    case data_source::fashion_mnist: return "fashion-mnist";
  }
  return "callback";
}

std::string render(const plan_issue& is, const field_namer& name) {
  std::string out = name(is.field) + ": ";
  const std::string& t = is.text;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::size_t close = t[i] == '{' ? t.find('}', i) : std::string::npos;
    if (close == std::string::npos) {
      out += t[i];
      continue;
    }
    out += name(std::string_view(t).substr(i + 1, close - i - 1));
    i = close;
  }
  return out;
}

std::optional<plan_issue> check_processes(const run_plan& p) {
  const process_spec& ps = p.processes;
  for (std::size_t k = 0; k < ps.workers.size(); ++k) {
    const std::string at = "processes.workers[" + str(static_cast<std::int64_t>(k)) + "]";
    auto a = parse_host_port(ps.workers[k]);
    if (!a) return issue(at, a.message());
    for (std::size_t j = 0; j < k; ++j)
      if (ps.workers[j] == ps.workers[k])
        return issue(at, "names " + ps.workers[k] + " again (it is also worker " + str(static_cast<std::int64_t>(j + 1)) +
                             "); each worker process is listed once");
  }
  if (!ps.rendezvous.empty()) {
    auto a = parse_host_port(ps.rendezvous);
    if (!a) return issue("processes.rendezvous", a.message());
    if (!ps.workers.empty())
      return issue("processes.rendezvous", "is set, and so is {processes.workers}: the workers "
                                           "either join at the driver's address or are listed");
    if (ps.world_size < 1 || ps.world_size > 65536)
      return issue("processes.world_size", "is " + str(ps.world_size) +
                                               "; with {processes.rendezvous} it must be the number "
                                               "of workers that join, 1..65536");
  } else if (ps.world_size != 0) {
    return issue("processes.world_size", "is set, but {processes.rendezvous} is not");
  }
  if ((!ps.workers.empty() || !ps.rendezvous.empty()) && !p.schedule)
    return issue("processes.workers", "is set, but a run with {schedule.kind} none trains in one "
                                      "process; choose a pipelined schedule");
  if (ps.heartbeat_ms < 10 || ps.heartbeat_ms > 60000)
    return issue("processes.heartbeat_ms", "is " + str(ps.heartbeat_ms) + ", not in 10..60000");
  if (ps.timeout_ms < 2 * ps.heartbeat_ms || ps.timeout_ms > 3600000)
    return issue("processes.timeout_ms",
                 "is " + str(ps.timeout_ms) + "; it must be at least twice {processes.heartbeat_ms} (" +
                     str(2 * ps.heartbeat_ms) + ") and at most 3600000, or a live peer could be "
                     "taken for lost");
  if (ps.transport != "ucx" && ps.transport != "caf")
    return issue("processes.transport", "is \"" + ps.transport + "\"; known: ucx, caf");
  if (ps.connect_ms < 100 || ps.connect_ms > 3600000)
    return issue("processes.connect_ms", "is " + str(ps.connect_ms) + ", not in 100..3600000");
  return std::nullopt;
}

std::optional<plan_issue> first_issue(const run_plan& p, int blocks) {
  if (blocks < 0) blocks = build_model<float>(p.model).size();
  if (auto i = check_schedule_shape(p)) return i;
  if (auto i = check_train(p)) return i;
  if (auto i = check_data(p)) return i;
  if (auto i = check_runtime(p)) return i;
  if (auto i = check_processes(p)) return i;
  if (!p.schedule) {
    if (auto i = check_single_device(p)) return i;
    return check_offload(p);
  }
  if (p.auto_partition) {  // the planner chooses the rest
    if (auto i = check_auto_partition(p)) return i;
    return check_offload(p);
  }
  if (p.zero > 0 && p.replicas < 2)
    return issue("runtime.zero", "shards the optimizer state over a stage's replicas, and "
                                 "{schedule.replicas} is 1: give 2 or more, or drop it");
  if (auto i = check_reduce(p)) return i;
  if (auto i = check_split(p, blocks)) return i;
  if (p.routes() > 1 && p.zero > 0)
    return issue("runtime.zero", "does not shard dualpipe's stages, whose two copies already sum "
                                 "their gradients on mirrored devices: drop it");
  const schedule_params sp{p.stages, p.train.microbatches, p.chunks, p.replicas, 1, p.reduce};
  if (auto s = make_schedule(*p.schedule, sp); !s && p.programs.empty())
    return issue("schedule.kind", s.message());
  if (auto i = check_ranks(p)) return i;
  if (auto i = check_offload(p)) return i;
  return check_credits(p);
}

int run_plan::routes() const {
  if (!schedule) return 1;
  if (programs.empty()) return default_routes(*schedule);
  // A line "# routes: 2" (routes_line), as to_programs_text writes it; plan_schedule checks that
  // the parsed text agrees.
  const std::string_view line = routes_line;
  const bool at_start = programs.compare(0, line.size(), line) == 0;
  return at_start || programs.find("\n" + std::string(line)) != std::string::npos ? 2 : 1;
}

status check(const run_plan& p, int blocks) {
  auto i = first_issue(p, blocks);
  if (!i) return {};
  return make_error(render(*i, [](std::string_view f) { return std::string(f); }));
}

std::string first_result_difference(const run_plan& a, const run_plan& b) {
  if (to_json(a.model) != to_json(b.model)) return "model";
  if (a.schedule != b.schedule) return "schedule.kind";
  if (a.programs != b.programs) return "schedule.programs";
  if (!a.programs.empty() && a.programs_versions != b.programs_versions) return "schedule.versions";
  if (a.stages != b.stages) return "schedule.stages";
  if (a.chunks != b.chunks) return "schedule.chunks";
  if (a.replicas != b.replicas) return "schedule.replicas";
  if (a.train.microbatches != b.train.microbatches) return "schedule.microbatches";
  if (a.train.steps != b.train.steps) return "schedule.steps";
  if (a.split != b.split) return "split";
  const optimizer_config &x = a.train.optim, &y = b.train.optim;
  if (x.kind != y.kind) return "optimizer.kind";
  if (x.lr != y.lr) return "optimizer.lr";
  if (x.momentum != y.momentum) return "optimizer.momentum";
  if (x.beta1 != y.beta1) return "optimizer.beta1";
  if (x.beta2 != y.beta2) return "optimizer.beta2";
  if (x.eps != y.eps) return "optimizer.eps";
  if (x.weight_decay != y.weight_decay) return "optimizer.weight_decay";
  if (a.train.decay_vectors != b.train.decay_vectors) return "optimizer.decay_vectors";
  if (a.train.warmup_steps != b.train.warmup_steps) return "lr_schedule.warmup_steps";
  if (a.train.min_lr != b.train.min_lr) return "lr_schedule.min_lr";
  if (a.train.clip_grad_norm != b.train.clip_grad_norm) return "clip.max_norm";
  if (a.data.source != b.data.source) return "data.source";
  if (a.data.path != b.data.path) return "data.path";
  if (a.data.batch != b.data.batch) return "data.batch";
  if (a.data.seed != b.data.seed) return "data.seed";
  return "";
}

void place_ranks(run_plan& plan) {
  const auto workers = static_cast<int>(plan.processes.workers.size());
  if (workers == 0) return;
  const int n = plan.rank_count();
  if (plan.ranks.empty()) plan.ranks.assign(static_cast<std::size_t>(n), rank_placement{});
  for (const rank_placement& r : plan.ranks)
    if (r.process != 0) return;  // the plan places them itself
  for (int r = 0; r < n; ++r)  // contiguous blocks: worker k holds ranks [k n / W, (k+1) n / W)
    plan.ranks[static_cast<std::size_t>(r)].process =
        1 + static_cast<int>(static_cast<std::int64_t>(r) * workers / n);
}

std::vector<int> ranks_in_process(const run_plan& plan, int process) {
  std::vector<int> out;
  for (int r = 0; r < plan.rank_count(); ++r) {
    const int at = plan.ranks.empty() ? 0 : plan.ranks[static_cast<std::size_t>(r)].process;
    if (at == process) out.push_back(r);
  }
  return out;
}

result<run_plan> resume_plan(const run_plan& saved, const run_plan& given, bool other_data) {
  run_plan want = given;
  const bool new_path = other_data && !given.data.path.empty() && given.data.path != saved.data.path;
  if (new_path) want.data.path = saved.data.path;  // compared below as the checkpoint's
  if (want.auto_partition || want.split.empty()) {  // the checkpoint's partitioning
    want.auto_partition.reset();
    want.stages = saved.stages;
    want.chunks = saved.chunks;
    want.replicas = saved.replicas;
    want.split = saved.split;
    if (given.auto_partition) {  // the planner chose these too
      want.train.microbatches = saved.train.microbatches;
      want.data.batch = saved.data.batch;
      want.ranks = saved.ranks;
      want.threads_per_stage = saved.threads_per_stage;
    }
  }
  std::string f = first_result_difference(saved, want);
  // ZeRO changes no result, but the rank files hold only the moments their replica owns.
  if (f.empty() && saved.zero != want.zero) f = "runtime.zero";
  // Nor does the reduce; but under p2p only the last replica's rank files hold moments.
  if (f.empty() && saved.reduce != want.reduce) f = "schedule.reduce";
  if (!f.empty()) {
    const bool layout = f == "schedule.kind" || f == "schedule.stages" || f == "schedule.chunks" ||
                        f == "schedule.replicas" || f == "schedule.microbatches" || f == "split" ||
                        f == "runtime.zero" || f == "schedule.reduce";
    const bool at_step_boundary = !saved.schedule || is_flush(*saved.schedule);
    std::string advice = "start a new run with --init to change it";
    if (f == "data.path")
      advice = "add --resume-on-other-data to go on training on this data (its new checkpoints "
               "record the data it replaced), or start a new run with --init";
    else if (layout && at_step_boundary)
      advice = "to continue it on another layout, re-cut the checkpoint first (pipeworks "
               "checkpoint reshard DIR --out NEWDIR with the new --schedule, --stages, --chunks, "
               "--replicas, --microbatches or --split) and resume NEWDIR";
    else if (layout)
      advice = "an asynchronous schedule's checkpoint holds microbatches and weight versions "
               "in flight for its own layout: resume it as it was; or restart its pipeline from "
               "each stage's newest weights and optimizer state, dropping what was in flight (not "
               "what the interrupted run would compute: pipeworks checkpoint reshard DIR --out "
               "NEWDIR --restart-pipeline --schedule with a flush schedule and the new --stages, "
               "--chunks, --replicas, --microbatches or --split, then resume NEWDIR); or start a "
               "new run from its weights with --init (the optimizer starts afresh)";
    return make_error(f + " differs from the checkpoint's plan; a resumed run must compute what "
                          "the interrupted one would have (" + advice + ")");
  }
  run_plan out = saved;
  if (new_path) out.data.path = given.data.path;
  out.credits = given.credits;
  out.threads_per_stage = want.threads_per_stage;
  out.detached = given.detached;
  out.weights_every = given.weights_every;
  out.checkpoint.every = given.checkpoint.every;
  out.checkpoint.keep = given.checkpoint.keep;
  // Like the devices, the GPU ranks' precision may change on resume (the run goes on elsewhere;
  // it is then no longer bit for bit the interrupted one).
  out.tf32 = given.tf32;
  out.bf16 = given.bf16;
  out.recompute = given.recompute;  // memory against time: the same bits either way
  out.offload = given.offload;      // device memory against host memory: the same bits too
  out.memory_limit = given.memory_limit;
  if (!given.checkpoint.dir.empty()) out.checkpoint.dir = given.checkpoint.dir;  // may have moved
  if (out.checkpoint.run.empty()) out.checkpoint.run = given.checkpoint.run;
  out.ranks = want.ranks.empty() ? saved.ranks : want.ranks;
  // The files are per rank, so the ranks may move: the given processes, and a placement of its
  // own unless the given plan placed them.
  out.processes = given.processes;
  if (want.ranks.empty())
    for (rank_placement& r : out.ranks) r.process = 0;
  return out;
}

}  // namespace pipeworks
