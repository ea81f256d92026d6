// `pipeworks train`: builds the run plan from the flags (or reads it with --plan, or from a
// checkpoint with --resume), loads the data, trains on one device or pipelined, and ends with an
// evaluation, a text sample and the outputs (checkpoint, metrics, trace).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "actors/pipeline.hpp"
#include "cli/auto_partition.hpp"
#include "cli/command.hpp"
#include "cli/stop_signals.hpp"
#include "cli/init_weights.hpp"
#include "cli/metrics_stream.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/train_plan.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_io.hpp"
#include "ops/model/param_split.hpp"
#include "ops/train/evaluate.hpp"
#include "ops/train/sample.hpp"
#include "ops/train/sources.hpp"
#include "partition/plan_resolve.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"
#include "runtime/exec/measured_costs.hpp"
#include "runtime/simulate.hpp"
#include "runtime/trace_chrome.hpp"

namespace pipeworks::cli {
namespace {

// Sampling runs one forward pass per byte; more than this is hours, not a demo.
constexpr std::int64_t max_sample_bytes = 100000;

// run.json -> run.sim.json: where --compare-sim writes the simulated trace.
std::string sim_trace_path(std::string path) {
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") path.resize(path.size() - 5);
  return path + ".sim.json";
}

// Profiles the measured run, simulates the same schedule with those costs, prints both
// makespans and writes the simulated trace next to the measured one.
void compare_with_simulation(const pipeline_result& r, const std::string& trace_path, bool json,
                             nlohmann::json& summary) {
  const cost_model costs = costs_from_timeline(r.trace, *r.programs);
  simulate_options so;
  so.title = r.trace.title + " (simulated with measured costs)";
  auto sim = simulate(*r.programs, costs, so);
  if (!sim) throw pipeworks_error("--compare-sim: " + sim.message());
  double first = r.trace.makespan();
  for (const auto& e : r.trace.events) first = std::min(first, e.start);
  const double measured = r.trace.makespan() - first;
  const std::string sim_path = sim_trace_path(trace_path);
  if (status s = write_chrome_trace(sim->trace, sim_path); !s) throw pipeworks_error(s.message());
  summary["measured_makespan_s"] = measured;
  summary["simulated_makespan_s"] = sim->makespan;
  summary["simulated_trace"] = sim_path;
  if (!json)
    std::printf("compare-sim: measured makespan %.3f s, simulated %.3f s (measured/simulated "
                "%.3f); traces %s and %s\n",
                measured, sim->makespan, sim->makespan > 0 ? measured / sim->makespan : 0.0,
                trace_path.c_str(), sim_path.c_str());
}

// ASCII only: a sampled byte may be half of a UTF-8 character.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    const bool control = c < 32 && c != '\n' && c != '\t';
    out.push_back(control || c >= 127 ? '?' : static_cast<char>(c));
  }
  return out;
}

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Weights, the spare version, gradients and two moments; a gpt batch is copied once to split.
void check_train_memory(const model<float>& net, const model_spec& spec, std::int64_t batch,
                        std::int64_t microbatch, const std::string& flag, const std::string& hint) {
  const double batch_bytes =
      spec.is_gpt() ? 4.0 * static_cast<double>(batch) * spec.gpt().context * sizeof(int) : 0;
  check_memory(net, 5, microbatch, batch_bytes, flag, hint);
}

// The training data and the held-out set of a plan's data source.
struct loaded_data {
  std::shared_ptr<const image_dataset> images;
  std::shared_ptr<const text_corpus> corpus;
  text_split text;
  minibatch held_out;
};

loaded_data load_data(const run_plan& plan, std::int64_t eval_windows, bool windows_given) {
  loaded_data d;
  const std::string& path = plan.data.path;
  if (plan.model.is_gpt()) {
    auto text = load_text(path);
    if (!text) throw pipeworks_error(text.message());
    d.corpus = std::make_shared<const text_corpus>(std::move(*text));
    d.text = split_text(d.corpus->view());
    const std::int64_t window = plan.model.gpt().context + 1;
    const auto fit = static_cast<std::int64_t>(d.text.validation.size()) / window;
    if (fit == 0)  // the last 5% of the text is held out; it must hold one window at least
      throw CLI::ValidationError(
          "--data", path + " has " + std::to_string(d.corpus->view().size()) +
                        " bytes: too small, as its held-out last 5% (" +
                        std::to_string(d.text.validation.size()) + " bytes) has no room for one " +
                        std::to_string(window) + "-byte window of the model's context; give a "
                        "text of at least " + std::to_string(20 * window) + " bytes");
    if (eval_windows > fit) {
      if (windows_given)
        throw CLI::ValidationError("--eval-windows", "the held-out part of " + path + " has room for " +
                                                         std::to_string(fit) + " windows, not " +
                                                         std::to_string(eval_windows));
      eval_windows = fit;
    }
    auto windows = text_windows(d.text.validation, eval_windows, plan.model.gpt().context,
                                path + " (validation part)");
    if (!windows) throw pipeworks_error(windows.message());
    d.held_out = std::move(*windows);
  } else {
    auto tr = load_fashion_mnist(dataset_split::train, path);
    if (!tr) throw pipeworks_error(tr.message());
    auto te = load_fashion_mnist(dataset_split::test, path);
    if (!te) throw pipeworks_error(te.message());
    d.images = std::make_shared<const image_dataset>(std::move(*tr));
    d.held_out = image_set(*te);
  }
  return d;
}

// The run's minibatches for a resolved plan (its batch may be the planner's).
data_factory data_of(const loaded_data& d, const run_plan& plan) {
  const std::int64_t context = plan.model.is_gpt() ? plan.model.gpt().context : 0;
  return [&d, context](const run_plan& p) -> result<minibatch_fn> {
    if (d.corpus) return text_minibatches(d.text.train, p.data.batch, context, p.data.seed);
    if (p.data.batch > d.images->size())
      return make_error("the batch " + std::to_string(p.data.batch) + " is larger than the " +
                        std::to_string(d.images->size()) + " training images");
    return image_minibatches(d.images, p.data.batch, p.data.seed);
  };
}

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
    auto step = latest_complete(f.resume);
    if (!step) throw pipeworks_error("--resume: " + step.message());
    auto m = read_checked_manifest(f.resume, *step);
    if (!m) throw pipeworks_error("--resume: " + m.message());
    const std::string dir = step_dir(f.resume, *step);
    if (status s = verify_files(*m, dir); !s) throw pipeworks_error("--resume: " + s.message());
    auto saved = parse_run_plan(m->plan.dump(), dir + "/" + manifest_name);
    if (!saved) throw pipeworks_error("--resume: " + saved.message());
    saved->checkpoint.dir = f.resume;
    run_plan given = plan_from_flags(o, *saved, false, threads, 0);
    // The processes are this run's: the workers given now (none: all ranks in this process).
    if (!f.given.count("--workers") && !f.given.count("--rendezvous")) {
      given.processes.workers.clear();
      for (rank_placement& r : given.ranks) r.process = 0;
    }
    auto merged = resume_plan(*saved, given);
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

int run_train(train_options& o) {
  pipeline_flags& f = o.pipe;
  check_auto_partition_flags(f);
  check_pipeline_flags(f);  // before the data loads and the profile runs
  check_cluster_flag(f);
  set_cpu_threads(o.threads);
  if (o.temperature <= 0) throw CLI::ValidationError("--temperature", "must be > 0");
  run_plan plan = make_plan(o);
  const model_spec& spec = plan.model;
  if (o.epochs > 0 && spec.is_gpt())
    throw CLI::ValidationError("--epochs", "--epochs is for mlp; use --steps for gpt");
  if (!spec.is_gpt())
    for (const char* flag : {"--sample", "--temperature", "--eval-windows"})
      if (o.pipe.given.count(flag))
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
  model<float> net = build_model<float>(spec);
  if (plan.data.batch % plan.train.microbatches == 0)
    check_train_memory(net, spec, plan.data.batch, plan.data.batch / plan.train.microbatches,
                       "--batch", "lower --batch, or raise --microbatches to split each batch");
  // --save may replace the --init file (training continues in place); no other input.
  check_outputs({{o.save, "--save"},
                 {o.metrics, "--metrics"},
                 {f.trace, "--trace"},
                 {f.compare_sim ? sim_trace_path(f.trace) : std::string(), "--compare-sim"},
                 {f.print_plan, "--print-plan"}},
                {{plan.data.path, "--data"},
                 {o.model, "--model"},
                 {f.plan, "--plan"},
                 {f.cluster, "--cluster"}},
                {{plan.data.path, "--data"},
                 {f.resume, "--resume"},
                 {f.init, "--init"},
                 {plan.checkpoint.dir, "--checkpoint-dir"}});

  const loaded_data data = load_data(plan, o.eval_windows, f.given.count("--eval-windows") > 0);
  if (data.images && o.epochs > 0 && f.plan.empty() && f.resume.empty()) {
    plan.train.steps = o.epochs * (data.images->size() / std::max<std::int64_t>(1, plan.data.batch));
    if (o.warmup < 0) plan.train.warmup_steps = std::min<std::int64_t>(plan.train.steps / 10, 100);
  }
  if (data.images && plan.data.batch > data.images->size())
    throw CLI::ValidationError("--batch", "larger than the " + std::to_string(data.images->size()) +
                                              " training images");
  check_plan_flags(plan, net.size());
  if (plan.checkpoint.every > 0 && f.print_plan.empty())
    if (status s = plan.data.position > 0 ? probe_writable_dir(plan.checkpoint.dir)
                                          : prepare_checkpoint_dir(plan.checkpoint.dir, false);
        !s)
      throw CLI::ValidationError(
          plan.data.position > 0 ? "--resume" : "--checkpoint-dir",
          s.message() + (plan.data.position > 0 ? " (the resumed run writes its checkpoints there; "
                                                  "or copy the directory somewhere writable and "
                                                  "resume from the copy)"
                                                : ""));
  pipeline_hooks hooks;
  hooks.record_trace = !f.trace.empty();
  if (!f.inject_fault.empty()) hooks.fault = parse_fault(f.inject_fault);
  if (status s = check(plan, hooks); !s) throw CLI::ValidationError("--inject-fault", s.message());
  const data_factory factory = data_of(data, plan);

  // --print-plan: resolved (split, or the planner's plan) and written; nothing trains.
  if (!f.print_plan.empty()) {
    auto resolved = resolve_plan(plan, net, [&](std::int64_t rows) -> result<minibatch> {
      run_plan at = plan;
      at.data.batch = rows;
      auto fn = factory(at);
      if (!fn) return fn.err();
      return (*fn)(at.data.position);
    });
    if (!resolved) throw pipeworks_error(resolved.message());
    if (!o.json && !resolved->report.empty()) std::fputs(resolved->report.c_str(), stdout);
    if (status s = write_text_atomic(f.print_plan, to_json_text(resolved->plan)); !s)
      throw pipeworks_error("cannot write the plan: " + s.message());
    if (!o.json) std::printf("plan written to %s (run it with --plan %s)\n", f.print_plan.c_str(),
                             f.print_plan.c_str());
    return exit_ok;
  }

  param_set initial = plan.init_from.empty() ? net.init_params(plan.init_seed)
                                             : load_init_weights(plan.init_from, net);
  if (!o.json) {
    // With --auto-partition the planner may choose the batch and microbatches (then printed with
    // the plan): the header says so rather than the values it starts from.
    const bool chosen = plan.auto_partition && !(plan.auto_partition->keep_batch &&
                                                 plan.auto_partition->keep_microbatches);
    const std::string batch = chosen ? std::string("the planner's batch")
                                     : "batch " + std::to_string(plan.data.batch) + " (" +
                                           std::to_string(plan.train.microbatches) + " microbatches)";
    std::printf(
        "pipeworks train: %s (%lld parameters, %d blocks) on %s, %lld steps of %s, %s lr %g, "
        "%d threads, BLAS core %s\n",
        spec.name.c_str(), static_cast<long long>(net.param_count()), net.size(),
        plan.data.path.c_str(), static_cast<long long>(plan.train.steps), batch.c_str(),
        std::string(optimizer_kind_name(plan.train.optim.kind)).c_str(), plan.train.optim.lr,
        cpu_threads(), blas_core_name().c_str());
    // Where the ranks run, when not all on the CPU: "ranks on cuda:0" or "ranks on cpu, cuda:0 x3".
    std::vector<std::pair<std::string, int>> devices;
    for (const rank_placement& r : plan.ranks) {
      if (devices.empty() || devices.back().first != r.device) devices.push_back({r.device, 0});
      ++devices.back().second;
    }
    const bool gpu_flags = plan.tf32 || plan.bf16;
    if (gpu_flags && (devices.empty() || (devices.size() == 1 && devices[0].first == "cpu")))
      std::fprintf(stderr, "pipeworks train: note: %s concerns GPU ranks, and every rank runs on "
                   "the CPU (in fp32): add --device cuda, or drop it\n",
                   plan.bf16 ? "--bf16" : "--tf32");
    if (devices.size() > 1 || (devices.size() == 1 && devices[0].first != "cpu")) {
      std::string list;
      for (const auto& [d, n] : devices)
        list += (list.empty() ? "" : ", ") + d + (n > 1 && devices.size() > 1 ? " x" + std::to_string(n) : "");
      const gpu_math math = gpu_math_of(plan.tf32, plan.bf16);
      std::printf("ranks on %s%s%s%s\n", list.c_str(), math == gpu_math::fp32 ? "" : " (",
                  math == gpu_math::fp32 ? "" : to_string(math),
                  math == gpu_math::fp32 ? "" : " matrix products on the GPU)");
    }
    if (plan.data.position > 0)
      std::printf("resuming from the checkpoint of step %lld in %s\n",
                  static_cast<long long>(plan.data.position), plan.checkpoint.dir.c_str());
  }
  std::fflush(stdout);

  // Resumed, the run adds its lines to those of the run it continues.
  metrics_stream metrics_file(o.metrics, plan.data.position > 0);
  progress_line progress(stdout, o.json);
  double total_samples_s = 0;
  std::int64_t first_samples = -1;
  pipeline_callbacks cb;
  cb.on_plan = [&](const run_plan& resolved, const std::string& report) -> status {
    if (!o.json && !report.empty()) {
      std::fputs(report.c_str(), stdout);
      std::fflush(stdout);
    }
    if (plan.auto_partition)  // 2BW chooses its own microbatch: check it fits
      try {
        check_train_memory(net, spec, resolved.data.batch,
                           resolved.data.batch / (resolved.train.microbatches * resolved.replicas),
                           "--planner", "the plan's microbatches do not fit; use --planner "
                           "pipedream, which keeps --batch / --microbatches");
      } catch (const CLI::ValidationError& e) {
        return make_error(e.what());
      }
    return {};
  };
  cb.on_step = [&](const step_metrics& m) {
    if (first_samples < 0) first_samples = m.samples - (m.samples_per_s * m.step_s);
    total_samples_s = m.elapsed_s > 0 ? static_cast<double>(m.samples - std::max<std::int64_t>(0, first_samples)) / m.elapsed_s : 0;
    const std::string line = dump({{"step", m.step},
                                   {"loss", m.loss},
                                   {"lr", m.lr},
                                   {"grad_norm", m.grad_norm},
                                   {"samples_per_s", m.samples_per_s},
                                   {"elapsed_s", m.elapsed_s}});
    if (o.json) std::cout << line << std::endl;
    metrics_file.write_line(line);
    progress.update({m.step, m.steps, m.loss, m.lr, m.samples_per_s, m.elapsed_s});
  };
  // A stop signal asks the run to stop; the driver then stops the stages and the weights are
  // saved. The handlers stay until this command returns, so a second signal cannot cut the save.
  const stop_signals signals;
  cb.stop_requested = [] { return stop_signals::requested(); };
  auto run = train_pipeline<float>(net, initial, plan, factory, cb, hooks);
  progress.finish();
  if (!run) throw pipeworks_error(run.message());
  for (std::size_t s = 0; s < run->weights.size(); ++s)
    if (!run->weights[s])  // only after Ctrl-C, when a stage did not answer within 5 s
      throw pipeworks_error("interrupted, but stage " + std::to_string(s) +
                            " did not send its weights in time; nothing was saved" +
                            (run->plan.checkpoint.every > 0
                                 ? " (continue from the latest checkpoint with --resume " +
                                       run->plan.checkpoint.dir + ")"
                                 : std::string()));
  auto joined = join_params(run->weights);
  if (!joined) throw pipeworks_error(joined.message());
  const param_set& weights = *joined;
  const step_metrics* last = &run->last;
  // An update can overflow the weights after the last loss was computed: such weights are never
  // saved, and the run does not end as if it had succeeded.
  if (const param_entry* bad = weights.first_non_finite())
    throw pipeworks_error(
        "the weights after step " + std::to_string(run->steps_done) + " are not finite (" +
        bad->name + " holds NaN or infinite values): the last update diverged, and nothing was "
        "saved; lower --lr (or raise --warmup, or lower --clip)" +
        (run->plan.checkpoint.every > 0
             ? ", or continue from the latest checkpoint with --resume " + run->plan.checkpoint.dir
             : std::string()));
  if (run->interrupted) {
    std::fprintf(stderr, "pipeworks train: interrupted by %s after %lld complete steps\n",
                 stop_signals::name(stop_signals::first()),
                 static_cast<long long>(run->steps_done));
    if (!o.save.empty()) {
      std::string stage_steps;
      for (int s : run->weight_steps) stage_steps += (stage_steps.empty() ? "" : ",") + std::to_string(s);
      metadata_map meta{{"pipeworks.model", to_json(spec).dump()},
                        {"pipeworks.steps", std::to_string(run->steps_done)},
                        {"pipeworks.stage_steps", stage_steps},
                        {"pipeworks.interrupted", "true"}};
      if (status s = save_params(o.save, weights, meta); !s) throw pipeworks_error(s.message());
      std::fprintf(stderr, "pipeworks train: the latest weights of every stage written to %s\n",
                   o.save.c_str());
    }
    if (run->plan.checkpoint.every > 0)
      if (auto latest = latest_complete(run->plan.checkpoint.dir))
        std::fprintf(stderr, "pipeworks train: continue with --resume %s (step %lld)\n",
                     run->plan.checkpoint.dir.c_str(), static_cast<long long>(*latest));
    return exit_interrupted(stop_signals::first());
  }

  nlohmann::json summary{{"final_loss", last->loss},
                         {"steps", last->step},
                         {"samples_per_s", total_samples_s},
                         {"elapsed_s", last->elapsed_s},
                         {"model", spec.name},
                         {"schedule", run->plan.schedule ? std::string(schedule_name(*run->plan.schedule)) : "none"}};
  // The first block of each stage, as --split takes it.
  summary["split"] = std::vector<int>(run->boundaries.begin(), run->boundaries.end() - 1);
  if (!run->plan_summary.empty()) summary["plan"] = nlohmann::json::parse(run->plan_summary);
  if (run->plan.data.position > 0 || plan.data.position > 0) summary["resumed_from"] = plan.data.position;
  if (run->plan.checkpoint.every > 0) summary["checkpoint_dir"] = run->plan.checkpoint.dir;
  if (!run->stages.empty()) {
    nlohmann::json stages = nlohmann::json::array();
    for (const stage_stats& st : run->stages)
      stages.push_back({{"stage", st.stage},
                        {"peak_versions", st.peak_versions},
                        {"peak_inflight", st.peak_inflight},
                        {"peak_activation_bytes", st.peak_activation_bytes},
                        {"device_peak_bytes", st.device_peak_bytes}});
    summary["stages"] = stages;
  }
  // The weights first: nothing after training (traces, evaluation) can lose them.
  if (!o.save.empty()) {
    metadata_map meta{{"pipeworks.model", to_json(spec).dump()},
                      {"pipeworks.steps", std::to_string(last->step)}};
    if (status s = save_params(o.save, weights, meta); !s)
      throw pipeworks_error(s.message() + "; the trained weights were not saved (check the disk "
                                          "space and permissions of --save's directory)");
    summary["checkpoint"] = o.save;
  }
  if (!f.trace.empty()) {
    if (status s = write_chrome_trace(run->trace, f.trace); !s) throw pipeworks_error(s.message());
    summary["trace"] = f.trace;
    if (f.compare_sim) compare_with_simulation(*run, f.trace, o.json, summary);
  }
  std::string sample;
  if (spec.is_gpt()) {
    auto loss = mean_loss(net, weights, data.held_out, 16);
    if (!loss) throw pipeworks_error(loss.message());
    summary["eval_loss"] = *loss;
    summary["eval_windows"] = data.held_out.inputs.dim(0);
    if (o.sample > 0) {
      sample = sample_text(net, weights, spec.gpt(), "\n",
                           {.bytes = o.sample, .temperature = o.temperature, .seed = o.seed});
      summary["sample"] = sample;
    }
  } else {
    auto acc = accuracy(net, weights, data.held_out, 1000);
    if (!acc) throw pipeworks_error(acc.message());
    summary["test_accuracy"] = *acc;
  }

  metrics_file.finish(dump(summary));
  if (o.json) {
    std::cout << dump(summary) << std::endl;
    return exit_ok;
  }
  std::printf("final loss %.4f (training loss of step %lld), %.1f samples/s over %s\n", last->loss,
              static_cast<long long>(last->step), total_samples_s,
              format_duration(last->elapsed_s).c_str());
  if (spec.is_gpt())
    std::printf("held-out loss %.4f over %lld windows of %s\n", summary["eval_loss"].get<double>(),
                static_cast<long long>(data.held_out.inputs.dim(0)), plan.data.path.c_str());
  else
    std::printf("test accuracy %.2f%% on %lld images\n",
                100.0 * summary["test_accuracy"].get<double>(),
                static_cast<long long>(data.held_out.inputs.dim(0)));
  if (run->programs) {
    std::string versions, inflight;
    for (const stage_stats& st : run->stages) {
      versions += " " + std::to_string(st.peak_versions);
      inflight += " " + std::to_string(st.peak_inflight);
    }
    std::printf("stages 0..%zu: peak live weight versions%s; peak stashed microbatches%s\n",
                run->stages.size() - 1, versions.c_str(), inflight.c_str());
  }
  if (!sample.empty())
    std::printf("sample (%lld bytes, temperature %g):\n%s\n", static_cast<long long>(o.sample),
                o.temperature, printable(sample).c_str());
  if (!o.save.empty())
    std::printf("outputs: checkpoint %s (safetensors, Hugging Face names)\n", o.save.c_str());
  if (run->plan.checkpoint.every > 0)
    std::printf("outputs: checkpoints in %s every %lld steps (continue with --resume %s)\n",
                run->plan.checkpoint.dir.c_str(), static_cast<long long>(run->plan.checkpoint.every),
                run->plan.checkpoint.dir.c_str());
  if (!o.metrics.empty())
    std::printf("outputs: metrics %s (one JSON object per step, then the summary)\n",
                o.metrics.c_str());
  if (!f.trace.empty())
    std::printf("outputs: trace %s (Chrome trace: open it in https://ui.perfetto.dev)\n",
                f.trace.c_str());
  if (o.save.empty() && o.metrics.empty() && f.trace.empty() && run->plan.checkpoint.every == 0)
    std::printf(
        "outputs: none written (use --save FILE for the weights, --save-every N "
        "--checkpoint-dir DIR for checkpoints, --metrics FILE for the metrics)\n");
  return exit_ok;
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
                     "for --schedule none and the flush schedules (gpipe, 1f1b, interleaved, "
                     "zb-h1, zb-h2, bfs), each stage's own norm for the asynchronous ones "
                     "(pipedream, pipedream-vs, 2bw, cyclic), whose stages step at different "
                     "times")
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
