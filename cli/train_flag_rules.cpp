// The flag rules of `pipeworks train`: contradictions between flags, flags that do not fit the
// plan's model or schedule, outputs that would clash, memory, and the checkpoint directory.
#include "cli/train_flag_rules.hpp"

#include <algorithm>
#include <filesystem>

#include "cli/auto_partition.hpp"
#include "cli/options.hpp"
#include "cli/pipeline_flags.hpp"
#include "cli/train_report.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"

namespace pipeworks::cli {

void check_flags(train_options& o) {
  pipeline_flags& f = o.pipe;
  // A resumed run keeps the checkpoint's partitioning and placement: a planner's flags would be
  // ignored, so they are refused (as --plan and --init are with --resume).
  if (!f.resume.empty())
    for (const char* flag : {"--auto-partition", "--cluster", "--planner"})
      if (f.given.count(flag))
        throw CLI::ValidationError(flag, "--resume DIR continues with the checkpoint's own "
                                         "partitioning (its stages, replicas, split and devices), "
                                         "so " + std::string(flag) + " would be ignored: drop it "
                                         "(or start a new run from the checkpoint with --init DIR "
                                         "to partition anew)");
  check_auto_partition_flags(f);
  check_pipeline_flags(f);  // before the data loads and the profile runs
  check_cluster_flag(f);
  if (o.temperature <= 0) throw CLI::ValidationError("--temperature", "must be > 0");
}

void check_flags_against_plan(const train_options& o, const run_plan& plan) {
  const pipeline_flags& f = o.pipe;
  if (o.epochs > 0 && plan.model.is_gpt())
    throw CLI::ValidationError("--epochs", "--epochs is for mlp; use --steps for gpt");
  if (o.epochs > 0 && f.given.count("--steps"))
    throw CLI::ValidationError("--epochs", "sets the steps from the data (epochs x training images "
                                           "/ --batch), and --steps sets them too: give one");
  if (!plan.model.is_gpt())
    for (const char* flag : {"--sample", "--temperature", "--eval-windows"})
      if (f.given.count(flag))
        throw CLI::ValidationError(flag, std::string(flag) + " is for gpt models (text); an mlp "
                                         "reports its test accuracy: drop it");
  if (!plan.schedule)
    for (const char* flag : {"--trace", "--credits", "--actors", "--inject-fault", "--chunks",
                             "--replicas", "--stages", "--split"})
      if (f.given.count(flag) && (std::string(flag) != "--stages" || f.stages != 1))
        throw CLI::ValidationError("--schedule", "--schedule none runs on one device without "
                                                 "actors; pick a schedule (e.g. --schedule 1f1b) "
                                                 "to use --stages, --replicas, --chunks, --split, "
                                                 "--trace, --credits, --actors or --inject-fault");
  if (f.init_partial && (plan.init_from.empty() || plan.data.position > 0))
    throw CLI::ValidationError("--init-partial", "there are no --init weights to load in part: "
                                                 "give --init FILE or DIR, or drop --init-partial");
}

void keep_checkpoint_data_path(const run_plan& saved, run_plan& given) {
  if (given.data.path == saved.data.path || given.data.path.empty() || saved.data.path.empty())
    return;
  std::error_code a, b;
  const auto now = std::filesystem::weakly_canonical(std::filesystem::absolute(given.data.path), a);
  const auto then = std::filesystem::weakly_canonical(std::filesystem::absolute(saved.data.path), b);
  if (!a && !b && now == then) given.data.path = saved.data.path;
}

void check_train_memory(const model<float>& net, const model_spec& spec, std::int64_t batch,
                        std::int64_t microbatch, const std::string& flag, const std::string& hint) {
  const double batch_bytes =
      spec.is_gpt() ? 4.0 * static_cast<double>(batch) * spec.gpt().context * sizeof(int) : 0;
  check_memory(net, 5, microbatch, batch_bytes, flag, hint);
}

void check_batch_memory(const model<float>& net, const run_plan& plan) {
  if (plan.data.batch % plan.train.microbatches == 0)
    check_train_memory(net, plan.model, plan.data.batch, plan.data.batch / plan.train.microbatches,
                       "--batch", "lower --batch, or raise --microbatches to split each batch");
}

namespace {

// The file a path names, resolved as far as it exists (symbolic links, "..", "."), to compare.
std::filesystem::path resolved(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? std::filesystem::path(path).lexically_normal() : p;
}

// The checkpoint directory the run writes is an output: refused inside (or as) the data
// directory, however it was given (--checkpoint-dir, a plan's checkpoint.dir, --resume).
void check_checkpoints_outside_data(const train_options& o, const run_plan& plan) {
  const pipeline_flags& f = o.pipe;
  const std::string& dir = plan.checkpoint.dir;
  if (dir.empty() || plan.data.path.empty() || !std::filesystem::is_directory(plan.data.path))
    return;
  if (plan.checkpoint.every <= 0 && !f.given.count("--checkpoint-dir")) return;  // none written
  const auto rel = resolved(dir).lexically_relative(resolved(plan.data.path));
  if (rel.empty() || *rel.begin() == "..") return;
  const std::string flag = f.given.count("--checkpoint-dir") ? "--checkpoint-dir"
                           : !f.resume.empty()               ? "--resume"
                           : !f.plan.empty()                 ? "--plan"
                                                             : "--checkpoint-dir";
  throw CLI::ValidationError(
      flag, "the checkpoint directory " + dir + (rel == "." ? " is" : " lies inside") +
                " the --data directory " + plan.data.path +
                ", which the run reads: checkpoints written there could destroy the data; "
                "choose a directory outside it");
}

}  // namespace

void check_train_outputs(const train_options& o, const run_plan& plan) {
  const pipeline_flags& f = o.pipe;
  check_checkpoints_outside_data(o, plan);
  // --save may replace the --init file (training continues in place); no other input.
  check_outputs({{o.save, "--save"},
                 {o.metrics, "--metrics"},
                 {f.trace, "--trace"},
                 {f.compare_sim ? sim_trace_path(f.trace) : std::string(), "--compare-sim"},
                 {f.print_plan, "--print-plan"}},
                {{plan.data.path, "--data"},
                 {o.model, "--model"},
                 {f.plan, "--plan"},
                 {f.cluster, "--cluster"},
                 {f.schedule_file, "--schedule-file"}},
                {{plan.data.path, "--data"},
                 {f.resume, "--resume"},
                 {f.init, "--init"},
                 {plan.checkpoint.dir, "--checkpoint-dir"}});
}

void fit_plan_to_images(const train_options& o, std::optional<std::int64_t> images,
                        run_plan& plan) {
  const pipeline_flags& f = o.pipe;
  if (!images) return;
  if (o.epochs > 0 && f.plan.empty() && f.resume.empty()) {
    plan.train.steps = o.epochs * (*images / std::max<std::int64_t>(1, plan.data.batch));
    if (o.warmup < 0) plan.train.warmup_steps = std::min<std::int64_t>(plan.train.steps / 10, 100);
  }
  if (plan.data.batch > *images)
    throw CLI::ValidationError("--batch", "larger than the " + std::to_string(*images) +
                                              " training images");
}

void check_resumed_checkpoint(const train_options& o, const run_plan& plan) {
  const pipeline_flags& f = o.pipe;
  if (plan.data.position <= 0) {
    if (f.resume_on_other_data)
      throw CLI::ValidationError("--resume-on-other-data",
                                 "only a resumed run (--resume DIR, or a --plan whose "
                                 "data.position is above 0) goes on from a checkpoint's data: "
                                 "drop it");
    return;
  }
  if (!f.print_plan.empty() || plan.checkpoint.dir.empty()) return;
  const char* flag = f.resume.empty() ? "--plan" : "--resume";
  auto m = read_checked_manifest(plan.checkpoint.dir, plan.data.position);
  if (!m) return;  // the run itself reports it, as it always has
  const std::string dir = step_dir(plan.checkpoint.dir, plan.data.position);
  // --resume verified every file as it read the checkpoint (make_plan); a --plan has not yet.
  if (f.resume.empty())
    if (status s = verify_files(*m, dir); !s) throw pipeworks_error(std::string(flag) + ": " + s.message());
  if (status s = check_rank_files(*m, dir); !s) throw CLI::ValidationError(flag, s.message());
  // A plan naming another data path than its checkpoint's is a change of the plan (resume_plan
  // refuses it, flag or not): said here, before the data's bytes are compared.
  const nlohmann::json& saved = m->plan;
  const auto same_file = [](const std::string& a, const std::string& b) {
    std::error_code ea, eb;
    return a == b || std::filesystem::weakly_canonical(std::filesystem::absolute(a), ea) ==
                         std::filesystem::weakly_canonical(std::filesystem::absolute(b), eb);
  };
  if (f.resume_on_other_data) return;  // another path, or other bytes: recorded in the manifests
  if (saved.contains("data") && saved["data"].contains("path") && saved["data"]["path"].is_string() &&
      saved["data"]["path"].get<std::string>() != plan.data.path &&
      !same_file(checkpoint_data_path(*m, saved["data"]["path"].get<std::string>()), plan.data.path))
    throw CLI::ValidationError(
        flag, "data.path " + plan.data.path + " is not the checkpoint's data.path " +
                  saved["data"]["path"].get<std::string>() + " (" + dir + "): a resumed run keeps "
                  "its checkpoint's data; add --resume-on-other-data to go on training on this data "
                  "(its new checkpoints record the data it replaced), or start a new run with "
                  "--init");
  if (status s = check_resume_data(*m, plan); !s)
    throw CLI::ValidationError(
        flag, s.message() + " (" + dir + "); nothing was trained. Give the data the checkpoint "
                            "read (a relative path is resolved in the working directory), or add "
                            "--resume-on-other-data to go on training on this data (its new "
                            "checkpoints record the data it replaced)");
}

void check_checkpoint_dir(const train_options& o, const run_plan& plan) {
  check_resumed_checkpoint(o, plan);
  if (plan.checkpoint.every <= 0 || !o.pipe.print_plan.empty()) return;
  const bool resumed = plan.data.position > 0;
  if (status s = resumed ? probe_writable_dir(plan.checkpoint.dir)
                         : prepare_checkpoint_dir(plan.checkpoint.dir, false);
      !s)
    throw CLI::ValidationError(
        resumed ? "--resume" : "--checkpoint-dir",
        s.message() + (resumed ? " (the resumed run writes its checkpoints there; or copy the "
                                 "directory somewhere writable and resume from the copy)"
                               : ""));
  if (resumed)  // a complete checkpoint after the position: another history in the directory
    if (status s = check_resume_dir(plan); !s)
      throw CLI::ValidationError(o.pipe.resume.empty() ? "--plan" : "--resume", s.message());
}

pipeline_hooks hooks_of(const train_options& o, const run_plan& plan) {
  const pipeline_flags& f = o.pipe;
  pipeline_hooks hooks;
  hooks.record_trace = !f.trace.empty();
  hooks.resume_on_other_data = f.resume_on_other_data;
  if (!f.inject_fault.empty()) hooks.fault = parse_fault(f.inject_fault);
  if (status s = check(plan, hooks); !s) throw CLI::ValidationError("--inject-fault", s.message());
  return hooks;
}

}  // namespace pipeworks::cli
