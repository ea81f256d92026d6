// `pipeworks train`: builds the run plan from the flags (or reads it with --plan, or from a
// checkpoint with --resume), loads the data, trains on one device or pipelined, and ends with an
// evaluation, a text sample and the outputs (checkpoint, metrics, trace).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/memory_limit.hpp"
#include "actors/pipeline.hpp"
#include "cli/command.hpp"
#include "cli/init_weights.hpp"
#include "cli/options.hpp"
#include "cli/stop_signals.hpp"
#include "cli/train_data.hpp"
#include "cli/train_flag_rules.hpp"
#include "cli/train_plan.hpp"
#include "cli/train_report.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "ops/cpu_threads.hpp"
#include "partition/plan_resolve.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/read_checkpoint.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"

namespace pipeworks::cli {
namespace {

// Sampling runs one forward pass per byte; more than this is hours, not a demo.
constexpr std::int64_t max_sample_bytes = 100000;

// The plan: from --plan FILE, from the latest checkpoint in --resume DIR (with the flags given
// applied, refused where they would change the results), or from the flags.
run_plan make_plan(train_options& o) {
  pipeline_flags& f = o.pipe;
  const int threads = cpu_threads();
  if (!f.plan.empty()) {
    for (const std::string& flag : f.given)
      if (shapes_the_run(flag))
        throw CLI::ValidationError(flag, "--plan " + f.plan + " holds the whole run: drop " + flag +
                                             " (or change it in the plan)");
    auto p = load_run_plan(f.plan);
    if (!p) throw CLI::ValidationError("--plan", p.message());
    apply_device_flags(o, *p);
    apply_process_flags(o, *p, false);
    return *p;
  }
  if (!f.resume.empty()) {
    if (o.epochs > 0)
      throw CLI::ValidationError("--epochs", "a resumed run keeps the steps of its checkpoint's "
                                             "plan: drop --epochs");
    if (f.given.count("--checkpoint-dir") && !f.checkpoint_dir.empty() &&
        [&] {
          std::error_code a, b;
          return std::filesystem::weakly_canonical(f.checkpoint_dir, a) !=
                 std::filesystem::weakly_canonical(f.resume, b);
        }())
      throw CLI::ValidationError("--checkpoint-dir", "a resumed run writes its checkpoints where "
                                                     "it reads them (--resume " + f.resume +
                                                     "): drop --checkpoint-dir, or copy the "
                                                     "checkpoints there and resume from it");
    // The newest checkpoint, read again when a run pruning the directory removes it meanwhile.
    auto got = read_checkpoint(f.resume, -1, [](const chosen_checkpoint& c) {
      return verify_files(c.manifest, c.dir);
    });
    if (!got) throw pipeworks_error("--resume: " + got.message());
    if (!got->read) throw pipeworks_error("--resume: " + got->read.message());
    const std::string dir = got->checkpoint.dir;
    auto saved = parse_run_plan(got->checkpoint.manifest.plan.dump(), dir + "/" + manifest_name);
    if (!saved) throw pipeworks_error("--resume: " + saved.message());
    saved->checkpoint.dir = f.resume;
    run_plan given = plan_from_flags(o, *saved, false, threads, 0);
    // A relative data path is relative to where the run started; the manifest recorded the data
    // by its absolute path, so a resume from another directory reads the same data, and --data
    // may name that file in any spelling. Other data given is compared as given (its own check).
    const std::string recorded = checkpoint_data_path(got->checkpoint.manifest, saved->data.path);
    std::error_code same_ec;
    if (!f.given.count("--data") || std::filesystem::equivalent(given.data.path, recorded, same_ec))
      saved->data.path = given.data.path = recorded;
    keep_checkpoint_data_path(*saved, given);
    // The processes are this run's: the workers given now (none: all ranks in this process).
    if (!f.given.count("--workers") && !f.given.count("--rendezvous")) {
      given.processes.workers.clear();
      for (rank_placement& r : given.ranks) r.process = 0;
    }
    auto merged = resume_plan(*saved, given, f.resume_on_other_data);
    if (!merged) {
      const std::string& msg = merged.message();
      const std::string field = msg.substr(0, msg.find(' '));
      // Both values, as the plan's JSON writes them ("optimizer.lr" is /optimizer/lr).
      std::string values;
      try {
        std::string pointer = "/" + field;
        std::replace(pointer.begin(), pointer.end(), '.', '/');
        const auto at = nlohmann::json::json_pointer(pointer);
        const auto was = nlohmann::json::parse(to_json_text(*saved)).at(at);
        const auto now = nlohmann::json::parse(to_json_text(given)).at(at);
        values = ": " + now.dump() + " given, " + was.dump() + " in the checkpoint";
      } catch (const std::exception&) {
      }
      throw CLI::ValidationError(flag_of(field) + ": " + msg.substr(msg.find(' ') + 1) + values +
                                 " (" + dir + ")");
    }
    return *merged;
  }
  if (o.model.empty())
    throw CLI::ValidationError("--model", "give --model (or --plan FILE, or --resume DIR)");
  return plan_from_flags(o, run_plan{}, true, threads, 0);
}

// --print-plan: the plan, checked, resolved (split, or the planner's plan) and written; nothing
// trains.
int print_plan(const train_options& o, const checked_plan& checked, const model<float>& net,
               const data_factory& factory) {
  const run_plan& plan = checked.get();
  auto resolved = resolve_plan(plan, net, [&](std::int64_t rows) -> result<minibatch> {
    run_plan at = plan;
    at.data.batch = rows;
    auto fn = factory(at);
    if (!fn) return fn.err();
    return (*fn)(at.data.position);
  });
  if (!resolved) throw pipeworks_error(resolved.message());
  if (!o.json && !resolved->report.empty()) std::fputs(resolved->report.c_str(), stdout);
  const std::string& path = o.pipe.print_plan;
  if (status s = write_text_atomic(path, to_json_text(resolved->plan)); !s)
    throw pipeworks_error("cannot write the plan: " + s.message());
  if (!o.json) std::printf("plan written to %s (run it with --plan %s)\n", path.c_str(), path.c_str());
  return exit_ok;
}

int run_train(train_options& o) {
  pipeline_flags& f = o.pipe;
  check_flags(o);  // before the data loads and the profile runs
  set_cpu_threads(o.threads);
  run_plan plan = make_plan(o);
  check_flags_against_plan(o, plan);
  model<float> net = build_model<float>(plan.model);
  check_batch_memory(net, plan);
  check_train_outputs(o, plan);

  const loaded_data data = load_data(plan, o.eval_windows, f.given.count("--eval-windows") > 0);
  fit_plan_to_images(o, data.images ? std::optional(data.images->size()) : std::nullopt, plan);
  const checked_plan checked = check_plan_flags(plan, net.size(), f.schedule_file);  // the run's one check
  // The flag's limit, or a plan file's (runtime.memory_limit): predicted first, then enforced.
  if (checked.get().memory_limit > 0)
    check_memory_limit(checked.get(), net, checked.get().memory_limit);
  check_checkpoint_dir(o, plan);
  pipeline_hooks hooks = hooks_of(o, plan);
  // Tests only: the driver's own clock reports a stop this long, so that what the driver makes of
  // its own stop is tested without stopping it and racing a sleep (tests/cli/cmd_worker_test.cpp).
  if (const char* ms = std::getenv("PIPEWORKS_TEST_DRIVER_STOPPED_MS"))
    hooks.driver_stopped = std::chrono::milliseconds(std::strtoll(ms, nullptr, 10));
  const data_factory factory = data_of(data, plan);
  if (!f.print_plan.empty()) return print_plan(o, checked, net, factory);

  param_set initial =
      plan.init_from.empty()
          ? net.init_params(plan.init_seed)
          : load_init_weights(plan.init_from, net, plan.init_seed, f.init_partial,
                              f.given.count("--init") ? "--init" : "--plan");
  if (!o.json) print_train_header(plan, net);
  std::fflush(stdout);
  train_reporter reporter(o, plan, net);
  // The handlers stay until this command returns, so a second signal cannot cut the save.
  const stop_signals signals;
  auto run = train_pipeline<float>(net, initial, checked, factory, reporter.callbacks(), hooks);
  reporter.finish_progress();
  if (plan.checkpoint.keep > 0 && plan.checkpoint.every > 0)  // what --keep did not remove
    if (auto left = foreign_step_dirs(plan.checkpoint.dir))
      for (const std::string& l : *left)
        std::fprintf(stderr, "pipeworks train: --keep left %s: only pipeworks' own files were "
                             "removed from it\n", l.c_str());
  if (!run) throw pipeworks_error(run.message());
  return report_run(o, plan, net, data.held_out, *run, reporter);
}

const bool registered = register_command(
    "train", "Train mlp or gpt on one device or pipelined over stages", [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<train_options>();
      sub.add_option("--model", o->model,
                     "mlp, gpt-tiny, gpt-small, or a JSON model file (required unless --plan or "
                     "--resume gives the run)");
      sub.add_option("--data", o->data,
                     "Fashion-MNIST directory (mlp) or a text file or directory (gpt); default "
                     "the Debian package's location");
      sub.add_option("--steps", o->steps, "optimizer steps")
          ->check(positive_int)
          ->capture_default_str();
      sub.add_option("--epochs", o->epochs, "mlp: train this many epochs (sets --steps)")
          ->check(positive_int);
      sub.add_option("--batch", o->batch, "samples per optimizer step")
          ->check(positive_int)
          ->capture_default_str();
      sub.add_option("--microbatches", o->microbatches,
                     "split each batch into m microbatches and accumulate their gradients")
          ->check(positive_int)
          ->capture_default_str();
      sub.add_option("--lr", o->lr, "peak learning rate")
          ->check(positive_number)
          ->capture_default_str();
      sub.add_option("--min-lr-ratio", o->min_lr_ratio, "the cosine schedule ends at lr times this")
          ->check(nonnegative_number)
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
      sub.add_option("--warmup", o->warmup,
                     "linear warmup steps (default: a tenth of the steps, at most 100)")
          ->check(nonnegative_int);
      sub.add_option("--optimizer", o->optimizer, "sgd or adamw")
          ->check(CLI::IsMember({"sgd", "adamw"}))
          ->capture_default_str();
      sub.add_option("--weight-decay", o->weight_decay,
                     "weight decay on matrices (default: sgd 0, adamw 0.01)")
          ->check(nonnegative_number);
      sub.add_option("--beta2", o->beta2, "adamw: the second-moment decay")
          ->check(CLI::Range(0.0, 0.99999))
          ->capture_default_str();
      sub.add_option("--clip", o->clip,
                     "clip the gradient norm to this (0: off): the global norm over all stages "
                     "for --schedule none and the flush schedules (" + schedule_names(true) +
                         "), each stage's own norm for the asynchronous ones (" +
                         schedule_names(false) + "), whose stages step at different times")
          ->check(nonnegative_number)
          ->capture_default_str();
      sub.add_option("--seed", o->seed, "seed for init and data order")
          ->check(seed_value)
          ->capture_default_str();
      add_threads_option(sub, o->threads);
      add_pipeline_flags(sub, o->pipe);
      add_checkpoint_flags(sub, o->pipe);
      add_process_flags(sub, o->pipe);
      CLI::App* app = &sub;  // main's parser owns it for the whole run
      sub.add_option("--save", o->save, "write the final weights to this safetensors file");
      sub.add_option("--metrics", o->metrics,
                     "also write the --json lines to this file (progress stays on screen)");
      sub.add_option("--sample", o->sample, "gpt: bytes of text to generate at the end")
          ->check(nonnegative_int)
          ->check(CLI::Range(std::int64_t{0}, max_sample_bytes))
          ->capture_default_str();
      sub.add_option("--temperature", o->temperature, "gpt: sampling temperature")
          ->check(positive_number)
          ->capture_default_str();
      sub.add_option("--eval-windows", o->eval_windows,
                     "gpt: held-out windows for the final loss (0: all)")
          ->check(nonnegative_int)
          ->capture_default_str();
      sub.add_flag("--json", o->json,
                   "one JSON object per line; the last has final_loss, steps, samples_per_s, "
                   "split (each stage's first block), test_accuracy (mlp) or eval_loss (gpt), "
                   "and with --auto-partition the plan");
      return [o, app] {
        for (const CLI::Option* opt : app->get_options())  // hidden ones too (--inject-fault)
          if (opt->count() > 0 && !opt->get_lnames().empty())
            o->pipe.given.insert("--" + opt->get_lnames().front());
        return run_train(*o);
      };
    });

}  // namespace
}  // namespace pipeworks::cli
