// `pipeworks train`: mlp or gpt on one device, pipelined or auto-partitioned, with progress,
// JSON metrics, a final evaluation, a text sample and an optional checkpoint.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include <atomic>
#include <csignal>

#include "actors/pipeline.hpp"
#include "cli/auto_partition.hpp"
#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/pipeline_flags.hpp"
#include "cli/progress.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_io.hpp"
#include "ops/model/param_split.hpp"
#include "runtime/exec/measured_costs.hpp"
#include "runtime/simulate.hpp"
#include "runtime/trace_chrome.hpp"
#include "ops/train/evaluate.hpp"
#include "ops/train/sample.hpp"
#include "ops/train/sources.hpp"

namespace pipeworks::cli {
namespace {

// Sampling runs one forward pass per byte; more than this is hours, not a demo.
constexpr std::int64_t max_sample_bytes = 100000;

struct train_options {
  std::string model, data, save, metrics, optimizer = "adamw";
  std::int64_t steps = 300, batch = 16, epochs = 0, warmup = -1, sample = 200, eval_windows = 64;
  int microbatches = 1, threads = 0;
  double lr = 1e-3, min_lr_ratio = 0.1, weight_decay = -1, clip = 1.0, temperature = 0.8;
  double beta2 = 0.999;
  std::uint64_t seed = 1;
  bool json = false;
  pipeline_flags pipe;
};

// Ctrl-C asks the run to stop; the driver then stops the stages and the weights are saved.
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted.store(true); }

// run.json -> run.sim.json: where --compare-sim writes the simulated trace.
std::string sim_trace_path(std::string path) {
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") path.resize(path.size() - 5);
  return path + ".sim.json";
}

// Profiles the measured run, simulates the same schedule with those costs, prints both
// makespans and writes the simulated trace next to the measured one.
void compare_with_simulation(const pipeline_result& r, const std::string& trace_path, bool json,
                             nlohmann::json& summary) {
  const cost_model costs = costs_from_timeline(r.trace, *r.plan);
  simulate_options so;
  so.title = r.trace.title + " (simulated with measured costs)";
  auto sim = simulate(*r.plan, costs, so);
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

// Checks the values CLI11 cannot; throws CLI::ValidationError naming the flag.
model_spec validate(train_options& o) {
  model_spec spec = parse_model_flag(o.model);
  if (o.batch % o.microbatches != 0)
    throw CLI::ValidationError("--microbatches", "--batch " + std::to_string(o.batch) +
                                                     " is not divisible by --microbatches " +
                                                     std::to_string(o.microbatches));
  if (o.epochs > 0 && spec.is_gpt())
    throw CLI::ValidationError("--epochs", "--epochs is for mlp; use --steps for gpt");
  if (o.warmup >= o.steps && o.epochs == 0)
    throw CLI::ValidationError("--warmup", "--warmup must be smaller than --steps");
  if (o.temperature <= 0) throw CLI::ValidationError("--temperature", "must be > 0");
  if (o.data.empty()) o.data = spec.is_gpt() ? fortunes_default_dir : fashion_mnist_default_dir;
  return spec;
}

train_config make_config(const train_options& o) {
  train_config c;
  c.steps = o.steps;
  c.microbatches = o.microbatches;
  auto kind = parse_optimizer_kind(o.optimizer);
  c.optim = default_optimizer_config(kind.value());
  c.optim.lr = o.lr;
  if (o.weight_decay >= 0) c.optim.weight_decay = o.weight_decay;
  c.optim.beta2 = o.beta2;
  c.min_lr = o.lr * o.min_lr_ratio;
  c.warmup_steps = o.warmup >= 0 ? o.warmup : std::min<std::int64_t>(o.steps / 10, 100);
  c.clip_grad_norm = o.clip;
  return c;
}

// One real sample of b rows from the training data (the profile's input), drawn like step 0's.
minibatch first_sample(const model_spec& spec, std::shared_ptr<const image_dataset> images,
                       const text_split& text, std::int64_t b, std::uint64_t seed) {
  auto mb = spec.is_gpt() ? text_minibatches(text.train, b, spec.gpt().context, seed)(0)
                          : image_minibatches(std::move(images), b, seed)(0);
  if (!mb) throw pipeworks_error("--auto-partition: the sample to profile: " + mb.message());
  return std::move(*mb);
}

// Weights, the spare version, gradients and two moments; a gpt batch is copied once to split.
void check_train_memory(const model<float>& net, const model_spec& spec, std::int64_t batch,
                        std::int64_t microbatch, const std::string& flag, const std::string& hint) {
  const double batch_bytes =
      spec.is_gpt() ? 4.0 * static_cast<double>(batch) * spec.gpt().context * sizeof(int) : 0;
  check_memory(net, 5, microbatch, batch_bytes, flag, hint);
}

int run_train(train_options& o) {
  check_auto_partition_flags(o.pipe);
  check_pipeline_flags(o.pipe);  // before the data loads and the profile runs
  model_spec spec = validate(o);
  set_cpu_threads(o.threads);
  model<float> net = build_model<float>(spec);
  check_train_memory(net, spec, o.batch, o.batch / o.microbatches, "--batch",
                     "lower --batch, or raise --microbatches to split each batch");
  if (!o.save.empty()) check_output_path(o.save, "--save");
  if (!o.metrics.empty()) check_output_path(o.metrics, "--metrics");
  if (!o.pipe.trace.empty()) check_output_path(o.pipe.trace, "--trace");
  if (o.pipe.compare_sim) check_output_path(sim_trace_path(o.pipe.trace), "--trace");

  // Data: the training source, and the held-out set for the final evaluation.
  std::shared_ptr<const image_dataset> train_images;
  std::shared_ptr<const text_corpus> corpus;
  minibatch held_out;
  text_split split;
  if (spec.is_gpt()) {
    auto text = load_text(o.data);
    if (!text) throw pipeworks_error(text.message());
    corpus = std::make_shared<const text_corpus>(std::move(*text));
    split = split_text(corpus->view());
    const auto fit = static_cast<std::int64_t>(split.validation.size()) / (spec.gpt().context + 1);
    if (o.eval_windows > fit)
      throw CLI::ValidationError("--eval-windows", "the held-out part of " + o.data +
                                                       " has room for " + std::to_string(fit) +
                                                       " windows, not " +
                                                       std::to_string(o.eval_windows));
    auto windows = text_windows(split.validation, o.eval_windows, spec.gpt().context,
                                o.data + " (validation part)");
    if (!windows) throw pipeworks_error(windows.message());
    held_out = std::move(*windows);
  } else {
    auto tr = load_fashion_mnist(dataset_split::train, o.data);
    if (!tr) throw pipeworks_error(tr.message());
    auto te = load_fashion_mnist(dataset_split::test, o.data);
    if (!te) throw pipeworks_error(te.message());
    train_images = std::make_shared<const image_dataset>(std::move(*tr));
    held_out = image_set(*te);
    if (o.batch > train_images->size())
      throw CLI::ValidationError(
          "--batch",
          "larger than the " + std::to_string(train_images->size()) + " training images");
  }
  // --auto-partition: profile, plan and print before anything runs; the flags become the plan's.
  std::optional<planned_run> planned;
  if (o.pipe.auto_partition) {
    planned = auto_partition_flags(
        o.pipe, net,
        [&](std::int64_t b) { return first_sample(spec, train_images, split, b, o.seed); },
        o.batch, o.microbatches, o.json);
    if (train_images && o.batch > train_images->size())
      throw CLI::ValidationError("--auto-partition", "the plan's batch " + std::to_string(o.batch) +
                                                         " is larger than the " +
                                                         std::to_string(train_images->size()) +
                                                         " training images");
    // 2BW chooses its own microbatch (up to 4x the profiled one) and batch: check them again.
    check_train_memory(net, spec, o.batch, planned->plan.microbatch, "--planner",
                       "the plan's microbatches of " + std::to_string(planned->plan.microbatch) +
                           " samples do not fit; use --planner pipedream, which keeps --batch / "
                           "--microbatches, with a smaller --batch or more --microbatches");
  }
  if (train_images && o.epochs > 0) o.steps = o.epochs * (train_images->size() / o.batch);
  train_config cfg = make_config(o);
  if (status s = validate(cfg); !s) throw CLI::ValidationError("train", s.message());
  minibatch_fn next = spec.is_gpt()
                          ? text_minibatches(split.train, o.batch, spec.gpt().context, o.seed)
                          : image_minibatches(train_images, o.batch, o.seed);

  if (!o.json)
    std::printf(
        "pipeworks train: %s (%lld parameters, %d blocks) on %s, %lld steps of batch %lld"
        " (%d microbatches), %s lr %g, %d threads, BLAS core %s\n",
        spec.name.c_str(), static_cast<long long>(net.param_count()), net.size(), o.data.c_str(),
        static_cast<long long>(o.steps), static_cast<long long>(o.batch), o.microbatches,
        o.optimizer.c_str(), o.lr, cpu_threads(), blas_core_name().c_str());
  std::fflush(stdout);

  std::ofstream metrics_file;
  if (!o.metrics.empty()) {
    metrics_file.open(o.metrics);
    if (!metrics_file) throw pipeworks_error("cannot write the metrics file " + o.metrics);
  }
  pipeline_options popts =
      make_pipeline_options(o.pipe, net, o.microbatches, o.batch, cpu_threads());
  popts.train = cfg;
  if (planned) {
    popts.device_speed = planned->plan.device_speed;
    popts.threads_per_stage = 1;  // a device of speed 1 is one core, as profiled
  }
  popts.stop_requested = [] { return interrupted.load(); };
  std::signal(SIGINT, on_sigint);
  progress_line progress(stdout, o.json);
  double total_samples_s = 0;
  auto run = train_pipeline<float>(net, net.init_params(o.seed), popts, next,
                                   [&](const step_metrics& m) {
    total_samples_s = m.elapsed_s > 0 ? static_cast<double>(m.samples) / m.elapsed_s : 0;
    const std::string line = dump({{"step", m.step},
                                   {"loss", m.loss},
                                   {"lr", m.lr},
                                   {"grad_norm", m.grad_norm},
                                   {"samples_per_s", m.samples_per_s},
                                   {"elapsed_s", m.elapsed_s}});
    if (o.json) std::cout << line << std::endl;
    if (metrics_file.is_open()) metrics_file << line << "\n";
    progress.update({m.step, m.steps, m.loss, m.lr, m.samples_per_s, m.elapsed_s});
  });
  progress.finish();
  std::signal(SIGINT, SIG_DFL);
  if (!run) throw pipeworks_error(run.message());
  auto joined = join_params(run->weights);
  if (!joined) throw pipeworks_error(joined.message());
  const param_set& weights = *joined;
  const step_metrics* last = &run->last;
  if (run->interrupted) {
    std::fprintf(stderr, "pipeworks train: interrupted (Ctrl-C) after %lld complete steps\n",
                 static_cast<long long>(run->steps_done));
    if (!o.save.empty()) {
      metadata_map meta{{"pipeworks.model", to_json(spec).dump()},
                        {"pipeworks.steps", std::to_string(run->steps_done)},
                        {"pipeworks.interrupted", "true"}};
      if (status s = save_params(o.save, weights, meta); !s) throw pipeworks_error(s.message());
      std::fprintf(stderr, "pipeworks train: final checkpoint written to %s\n", o.save.c_str());
    }
    return exit_interrupted;
  }

  nlohmann::json summary{{"final_loss", last->loss},
                         {"steps", last->step},
                         {"samples_per_s", total_samples_s},
                         {"elapsed_s", last->elapsed_s},
                         {"model", spec.name},
                         {"schedule", o.pipe.schedule}};
  // The first block of each stage, as --split takes it.
  summary["split"] = std::vector<int>(run->boundaries.begin(), run->boundaries.end() - 1);
  if (planned) summary["plan"] = plan_json(*planned, o.pipe.cluster);
  if (!run->stages.empty()) {
    nlohmann::json stages = nlohmann::json::array();
    for (const stage_stats& st : run->stages)
      stages.push_back({{"stage", st.stage},
                        {"peak_versions", st.peak_versions},
                        {"peak_inflight", st.peak_inflight},
                        {"peak_activation_bytes", st.peak_activation_bytes}});
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
  if (!o.pipe.trace.empty()) {
    if (status s = write_chrome_trace(run->trace, o.pipe.trace); !s)
      throw pipeworks_error(s.message());
    summary["trace"] = o.pipe.trace;
    if (o.pipe.compare_sim) compare_with_simulation(*run, o.pipe.trace, o.json, summary);
  }
  std::string sample;
  if (spec.is_gpt()) {
    auto loss = mean_loss(net, weights, held_out, 16);
    if (!loss) throw pipeworks_error(loss.message());
    summary["eval_loss"] = *loss;
    summary["eval_windows"] = held_out.inputs.dim(0);
    if (o.sample > 0) {
      sample = sample_text(net, weights, spec.gpt(), "\n",
                           {.bytes = o.sample, .temperature = o.temperature, .seed = o.seed});
      summary["sample"] = sample;
    }
  } else {
    auto acc = accuracy(net, weights, held_out, 1000);
    if (!acc) throw pipeworks_error(acc.message());
    summary["test_accuracy"] = *acc;
  }

  if (metrics_file.is_open()) {
    metrics_file << dump(summary) << "\n";
    metrics_file.close();
    if (metrics_file.fail())
      throw pipeworks_error("writing the metrics file " + o.metrics + " failed");
  }
  if (o.json) {
    std::cout << dump(summary) << std::endl;
    return exit_ok;
  }
  std::printf("final loss %.4f (training loss of step %lld), %.1f samples/s over %s\n", last->loss,
              static_cast<long long>(last->step), total_samples_s,
              format_duration(last->elapsed_s).c_str());
  if (spec.is_gpt())
    std::printf("held-out loss %.4f over %lld windows of %s\n", summary["eval_loss"].get<double>(),
                static_cast<long long>(held_out.inputs.dim(0)), o.data.c_str());
  else
    std::printf("test accuracy %.2f%% on %lld images\n",
                100.0 * summary["test_accuracy"].get<double>(),
                static_cast<long long>(held_out.inputs.dim(0)));
  if (run->plan) {
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
  if (!o.metrics.empty())
    std::printf("outputs: metrics %s (one JSON object per step, then the summary)\n",
                o.metrics.c_str());
  if (!o.pipe.trace.empty())
    std::printf("outputs: trace %s (Chrome trace: open it in https://ui.perfetto.dev)\n",
                o.pipe.trace.c_str());
  if (o.save.empty() && o.metrics.empty() && o.pipe.trace.empty())
    std::printf(
        "outputs: none written (use --save FILE for a checkpoint, --metrics FILE for "
        "the metrics)\n");
  return exit_ok;
}

const bool registered = register_command(
    "train", "Train mlp or gpt on one device or pipelined over stages", [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<train_options>();
      sub.add_option("--model", o->model, "mlp, gpt-tiny, gpt-small, or a JSON model file")
          ->required();
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
      sub.add_option("--clip", o->clip, "clip the gradient's global norm to this (0: off)")
          ->check(nonnegative_number)
          ->capture_default_str();
      sub.add_option("--seed", o->seed, "seed for init and data order")->capture_default_str();
      add_threads_option(sub, o->threads);
      add_pipeline_flags(sub, o->pipe);
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
        for (const char* flag : {"--schedule", "--stages", "--replicas", "--chunks", "--split",
                                 "--cluster", "--planner", "--batch", "--microbatches",
                                 "--threads"})
          if (app->count(flag) > 0) o->pipe.given.insert(flag);
        return run_train(*o);
      };
    });

}  // namespace
}  // namespace pipeworks::cli
