// Flags to run plan and back: plan_from_flags, the field-to-flag table and check_plan_flags.
#include "cli/train_plan.hpp"

#include <algorithm>
#include <utility>

#include "cli/memory_limit.hpp"
#include "cli/options.hpp"
#include "ops/data/fashion_mnist.hpp"
#include "ops/data/text.hpp"
#include "cli/split_flag.hpp"
#include "base/input_file.hpp"
#include "runtime/plan_schedule.hpp"

namespace pipeworks::cli {
namespace {

// Plan field (or its prefix) -> the flag that sets it.
const std::pair<const char*, const char*> field_flags[] = {
    {"model", "--model"},
    {"schedule.kind", "--schedule"},
    {"schedule.programs", "--schedule-file"},
    {"schedule.versions", "--schedule-versions"},
    {"schedule.stages", "--stages"},
    {"schedule.chunks", "--chunks"},
    {"schedule.replicas", "--replicas"},
    {"schedule.microbatches", "--microbatches"},
    {"schedule.steps", "--steps"},
    {"split", "--split"},
    {"ranks", "--cluster"},
    {"optimizer.kind", "--optimizer"},
    {"optimizer.lr", "--lr"},
    {"optimizer.weight_decay", "--weight-decay"},
    {"optimizer.beta2", "--beta2"},
    {"optimizer", "--optimizer"},
    {"lr_schedule.min_lr", "--min-lr-ratio"},
    {"lr_schedule.warmup_steps", "--warmup"},
    {"clip", "--clip"},
    {"data.source", "--data"},
    {"data.path", "--data"},
    {"data.batch", "--batch"},
    {"data.seed", "--seed"},
    {"data.position", "--resume"},
    {"init.seed", "--seed"},
    {"init.from", "--init"},
    {"runtime.credits", "--credits"},
    {"runtime.threads_per_stage", "--threads"},
    {"runtime.actors", "--actors"},
    {"runtime.tf32", "--tf32"},
    {"runtime.bf16", "--bf16"},
    {"runtime.recompute", "--recompute"},
    {"runtime.zero", "--zero"},
    {"schedule.reduce", "--reduce"},
    {"runtime.offload", "--offload"},
    {"runtime.memory_limit", "--memory-limit"},
    {"checkpoint.every", "--save-every"},
    {"checkpoint.dir", "--checkpoint-dir"},
    {"checkpoint.keep", "--keep"},
    {"auto_partition.planner", "--planner"},
    {"auto_partition.cluster", "--cluster"},
    {"auto_partition", "--auto-partition"},
    {"processes.workers", "--workers"},
    {"processes.heartbeat_ms", "--heartbeat-ms"},
    {"processes.timeout_ms", "--peer-timeout-ms"},
    {"processes.connect_ms", "--connect-timeout-ms"},
    {"processes.rendezvous", "--rendezvous"},
    {"processes.world_size", "--world-size"},
    {"processes.transport", "--transport"},
};

bool given(const train_options& o, bool all, const char* flag) {
  return all || o.pipe.given.count(flag) > 0;
}

// --schedule-file: the plan carries the file's programs, and takes the stages, chunks and
// microbatches the file has unless their flags are given (first_issue refuses a mismatch).
void apply_schedule_file(const train_options& o, run_plan& p) {
  const pipeline_flags& f = o.pipe;
  if (f.given.count("--schedule"))
    throw CLI::ValidationError("--schedule-file", "and --schedule both name a schedule: drop one");
  auto text = read_input_text(f.schedule_file, std::uint64_t{256} << 20, "schedule file");
  if (!text) throw CLI::ValidationError("--schedule-file", text.message());
  auto file = parse_schedule_file(*text);
  if (!file) throw CLI::ValidationError("--schedule-file", f.schedule_file + ": " + file.message());
  std::optional<version_mode> versions;  // the flag's; else the file's, or the default
  if (!f.schedule_versions.empty()) versions = parse_version_mode(f.schedule_versions).value();
  if (status ok = use_schedule_file(p, *file, versions); !ok)
    throw CLI::ValidationError("--schedule-file", f.schedule_file + ": " + ok.message());
  if (f.given.count("--stages")) p.stages = f.stages;
  if (f.given.count("--chunks")) p.chunks = f.chunks;
  if (f.given.count("--microbatches")) p.train.microbatches = o.microbatches;
}

}  // namespace

bool shapes_the_run(std::string_view flag) {
  for (const auto& [field, f] : field_flags)
    if (flag == f && std::string_view(field).substr(0, 10) != "processes.") return true;
  return flag == "--epochs";
}

std::string flag_of(std::string_view field) {
  // A rank's device (ranks[N].device) is --device's, which places every rank.
  if (field.substr(0, 6) == "ranks[" && field.size() > 8 &&
      field.substr(field.size() - 8) == "].device")
    return "--device";
  for (const auto& [f, flag] : field_flags) {
    const std::string_view prefix(f);
    if (field == prefix || (field.substr(0, prefix.size()) == prefix &&
                            (field.size() == prefix.size() || field[prefix.size()] == '.' ||
                             field[prefix.size()] == '[')))
      return flag;
  }
  return std::string(field);
}

checked_plan check_plan_flags(const run_plan& plan, int blocks, const std::string& schedule_file) {
  auto checked = check_plan(plan, blocks, [&](std::string_view f) {
    const std::string flag = flag_of(f);
    return flag == "--schedule-file" && !schedule_file.empty() ? flag + " " + schedule_file : flag;
  });
  if (!checked) throw CLI::ValidationError(checked.message());
  return std::move(*checked);
}

void apply_device_flags(const train_options& o, run_plan& p) {
  const pipeline_flags& f = o.pipe;
  if (f.given.count("--device")) {  // only when given: else the plan's own placements stay
    if (static_cast<int>(p.ranks.size()) != p.rank_count()) p.ranks.assign(p.rank_count(), {});
    const named_device device = parse_named_device(f.device).value();  // the flag's check parsed it
    for (rank_placement& r : p.ranks) r.device = device;
  }
  if (f.given.count("--tf32")) p.tf32 = f.tf32;
  if (f.given.count("--bf16")) p.bf16 = f.bf16;
  if (f.given.count("--recompute")) p.recompute = parse_recompute(f.recompute).value();
  if (f.given.count("--zero")) p.zero = f.zero;
  if (f.given.count("--offload")) p.offload = parse_offload(f.offload).value();  // checked
  if (f.given.count("--memory-limit")) p.memory_limit = parse_bytes(f.memory_limit).value();
}

void apply_process_flags(const train_options& o, run_plan& p, bool all) {
  const pipeline_flags& f = o.pipe;
  auto has = [&](const char* flag) { return given(o, all, flag); };
  if (has("--workers")) {
    p.processes.workers.clear();
    p.processes.rendezvous.clear();
    p.processes.world_size = 0;
    std::string rest = f.workers;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      p.processes.workers.push_back(rest.substr(0, comma));
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    for (rank_placement& r : p.ranks) r.process = 0;  // placed anew over the workers given
  }
  if (has("--rendezvous") && !f.rendezvous.empty()) {
    p.processes.rendezvous = f.rendezvous;
    p.processes.workers.clear();
    for (rank_placement& r : p.ranks) r.process = 0;
  }
  if (has("--world-size")) p.processes.world_size = f.world_size;
  if (has("--heartbeat-ms")) p.processes.heartbeat_ms = f.heartbeat_ms;
  if (has("--peer-timeout-ms")) p.processes.timeout_ms = f.peer_timeout_ms;
  if (has("--connect-timeout-ms")) p.processes.connect_ms = f.connect_timeout_ms;
  if (has("--transport")) p.processes.transport = f.transport;
}

run_plan plan_from_flags(const train_options& o, run_plan p, bool all, int threads,
                         std::int64_t images) {
  const pipeline_flags& f = o.pipe;
  auto has = [&](const char* flag) { return given(o, all, flag); };
  if (has("--model")) p.model = parse_model_flag(o.model);
  if (has("--data") || has("--model")) {
    p.data.source = p.model.is_gpt() ? data_source::text : data_source::fashion_mnist;
    p.data.path = !o.data.empty() ? o.data
                  : p.model.is_gpt() ? fortunes_default_dir
                                     : fashion_mnist_default_dir;
  }
  if (has("--schedule")) {
    if (f.schedule == "none") {
      p.schedule.reset();
    } else {
      auto k = parse_schedule_kind(f.schedule);
      if (!k) throw CLI::ValidationError("--schedule", k.message());
      p.schedule = *k;
    }
  }
  if (has("--stages")) p.stages = f.stages;
  // A V schedule holds two virtual stages per device unless --chunks itself says otherwise (under
  // --auto-partition the V planner places them).
  if (p.schedule && default_chunks(*p.schedule) == 2 && f.given.count("--chunks") == 0 &&
      !f.auto_partition)
    p.chunks = default_chunks(*p.schedule);
  else if (has("--chunks"))
    p.chunks = f.chunks;
  if (has("--replicas")) p.replicas = f.replicas;
  if (has("--reduce")) p.reduce = f.reduce == "p2p" ? reduce_mode::p2p : reduce_mode::collective;
  if (has("--microbatches")) p.train.microbatches = o.microbatches;
  if (has("--batch")) p.data.batch = o.batch;
  if (has("--seed")) {
    p.data.seed = o.seed;
    p.init_seed = o.seed;
  }
  if (has("--steps")) p.train.steps = o.steps;
  if (f.given.count("--schedule-file")) apply_schedule_file(o, p);
  if (o.epochs > 0 && images > 0 && p.data.batch > 0)
    p.train.steps = o.epochs * (images / p.data.batch);
  if (has("--optimizer")) {
    auto kind = parse_optimizer_kind(o.optimizer);
    if (!kind) throw CLI::ValidationError("--optimizer", kind.message());
    const double lr = p.train.optim.lr, beta2 = p.train.optim.beta2;
    p.train.optim = default_optimizer_config(*kind);
    p.train.optim.lr = lr;
    p.train.optim.beta2 = beta2;
  }
  if (has("--lr")) p.train.optim.lr = o.lr;
  if (has("--weight-decay") && o.weight_decay >= 0) p.train.optim.weight_decay = o.weight_decay;
  if (has("--beta2")) p.train.optim.beta2 = o.beta2;
  if (has("--lr") || has("--min-lr-ratio")) p.train.min_lr = p.train.optim.lr * o.min_lr_ratio;
  if (has("--warmup") && o.warmup >= 0) p.train.warmup_steps = o.warmup;
  else if (all || has("--steps") || o.epochs > 0)
    p.train.warmup_steps = std::min<std::int64_t>(p.train.steps / 10, 100);
  if (has("--clip")) p.train.clip_grad_norm = o.clip;
  if (has("--split")) {
    p.split.clear();
    if (!f.split.empty()) {
      const int blocks = build_model<float>(p.model).size();
      auto b = parse_split(f.split, blocks, p.model_stages());
      if (!b) throw CLI::ValidationError("--split", b.message());
      p.split.assign(b->begin(), b->end() - 1);
    }
  }
  if (has("--credits")) p.credits = f.credits;
  if (has("--actors")) p.detached = f.actors == "detached";
  if (has("--threads") || all) p.threads_per_stage = std::max(1, threads / std::max(1, p.rank_count()));
  if (has("--save-every")) p.checkpoint.every = f.save_every;
  if (has("--checkpoint-dir")) p.checkpoint.dir = f.checkpoint_dir;
  if (has("--keep")) p.checkpoint.keep = f.keep;
  if (has("--init")) p.init_from = f.init;
  apply_device_flags(o, p);
  apply_process_flags(o, p, all);
  if (f.auto_partition) {
    auto_partition_spec a;
    a.planner = parse_planner_kind(f.planner).value();  // the flag's check allows known names
    a.cluster = f.cluster;
    a.keep_batch = f.given.count("--batch") > 0;
    a.keep_microbatches = f.given.count("--microbatches") > 0;
    a.choose_recompute = f.given.count("--recompute") == 0;
    p.auto_partition = a;
    p.threads_per_stage = 1;
  }
  return p;
}

}  // namespace pipeworks::cli
