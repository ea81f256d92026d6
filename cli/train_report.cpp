// `pipeworks train`'s reports: the header, the per-step lines and metrics, and the end of the run
// (weights checked and saved, trace and --compare-sim, evaluation, sample, summary).
#include "cli/train_report.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/memory_limit.hpp"
#include "cli/stop_signals.hpp"
#include "cli/train_flag_rules.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/model/param_io.hpp"
#include "ops/model/param_split.hpp"
#include "ops/train/evaluate.hpp"
#include "ops/train/sample.hpp"
#include "runtime/plan_schedule.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/exec/measured_costs.hpp"
#include "runtime/simulate.hpp"
#include "runtime/trace_chrome.hpp"

namespace pipeworks::cli {
namespace {

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

// " (continue from the latest checkpoint with --resume DIR)" when the run wrote checkpoints.
std::string continue_hint(const run_plan& p, const std::string& before, const std::string& after) {
  return p.checkpoint.every > 0 ? before + p.checkpoint.dir + after : std::string();
}

// The weights of every stage, joined: refused when a stage sent none (after a stop) or when they
// are not finite (an update diverged after the last loss).
param_set final_weights(const pipeline_result& run) {
  for (std::size_t s = 0; s < run.weights.size(); ++s)
    if (!run.weights[s])  // only after Ctrl-C, when a stage did not answer within 5 s
      throw pipeworks_error("interrupted, but stage " + std::to_string(s) +
                            " did not send its weights in time; nothing was saved" +
                            continue_hint(run.plan, " (continue from the latest checkpoint with "
                                                    "--resume ", ")"));
  auto joined = join_params(run.weights);
  if (!joined) throw pipeworks_error(joined.message());
  // An update can overflow the weights after the last loss was computed: such weights are never
  // saved, and the run does not end as if it had succeeded.
  if (const param_entry* bad = joined->first_non_finite())
    throw pipeworks_error(
        "the weights after step " + std::to_string(run.steps_done) + " are not finite (" +
        bad->name + " holds NaN or infinite values): the last update diverged, and nothing was "
        "saved; lower --lr (or raise --warmup, or lower --clip)" +
        continue_hint(run.plan, ", or continue from the latest checkpoint with --resume ", ""));
  return std::move(*joined);
}

// A stopped run: says so, saves the latest weights of every stage to --save and says how to
// continue.
int report_interrupted(const train_options& o, const run_plan& plan, const pipeline_result& run,
                       const param_set& weights) {
  std::fprintf(stderr, "pipeworks train: interrupted by %s after %lld complete steps\n",
               stop_signals::name(stop_signals::first()), static_cast<long long>(run.steps_done));
  if (!o.save.empty()) {
    std::string stage_steps;
    for (int s : run.weight_steps) stage_steps += (stage_steps.empty() ? "" : ",") + std::to_string(s);
    metadata_map meta{{"pipeworks.model", to_json(plan.model).dump()},
                      {"pipeworks.steps", std::to_string(run.steps_done)},
                      {"pipeworks.stage_steps", stage_steps},
                      {"pipeworks.interrupted", "true"}};
    if (status s = save_params(o.save, weights, meta); !s) throw pipeworks_error(s.message());
    std::fprintf(stderr, "pipeworks train: the latest weights of every stage written to %s\n",
                 o.save.c_str());
  }
  if (run.plan.checkpoint.every > 0)
    if (auto latest = latest_complete(run.plan.checkpoint.dir))
      std::fprintf(stderr, "pipeworks train: continue with --resume %s (step %lld)\n",
                   run.plan.checkpoint.dir.c_str(), static_cast<long long>(*latest));
  return exit_interrupted(stop_signals::first());
}

// The summary's run fields: loss, steps, throughput, model, schedule, split, the planner's plan,
// the step resumed from, the checkpoints and each stage's peaks.
nlohmann::json run_summary(const run_plan& plan, const pipeline_result& run, double samples_per_s) {
  const step_metrics& last = run.last;
  nlohmann::json summary{{"final_loss", last.loss},
                         {"steps", last.step},
                         {"samples_per_s", samples_per_s},
                         {"elapsed_s", last.elapsed_s},
                         {"model", plan.model.name},
                         {"blas_core", blas_core_name()},
                         {"schedule", schedule_label(run.plan)}};
  // The first block of each stage, as --split takes it.
  summary["split"] = std::vector<int>(run.boundaries.begin(), run.boundaries.end() - 1);
  if (!run.plan_summary.empty()) summary["plan"] = nlohmann::json::parse(run.plan_summary);
  if (run.plan.data.position > 0 || plan.data.position > 0) summary["resumed_from"] = plan.data.position;
  if (run.plan.checkpoint.every > 0) summary["checkpoint_dir"] = run.plan.checkpoint.dir;
  if (!run.stages.empty()) {
    // The runtime's prediction (what --memory-limit checks) beside each measured peak.
    std::vector<stage_memory> predicted;
    try {
      predicted = predict_stages(run.plan);
    } catch (const std::exception&) {
      predicted.clear();  // a prediction that cannot be made leaves the measured figures alone
    }
    // The device of each virtual stage: device_peak_bytes is its rank's, over all its stages.
    std::vector<int> device_of;
    if (run.plan.schedule)
      if (auto made = plan_schedule(run.plan, 1)) device_of = made->device_of;
    nlohmann::json stages = nlohmann::json::array();
    for (const stage_stats& st : run.stages) {
      nlohmann::json s{{"stage", st.stage},
                       {"peak_versions", st.peak_versions},
                       {"peak_inflight", st.peak_inflight},
                       {"peak_activation_bytes", st.peak_activation_bytes},
                       {"device_peak_bytes", st.device_peak_bytes},
                       {"optimizer_bytes", st.optimizer_bytes}};
      if (static_cast<std::size_t>(st.stage) < device_of.size())
        s["device"] = device_of[static_cast<std::size_t>(st.stage)];
      if (static_cast<std::size_t>(st.stage) < predicted.size()) {
        const stage_memory& p = predicted[static_cast<std::size_t>(st.stage)];
        s["predicted"] = {{"peak_versions", p.peak_versions},
                          {"peak_inflight", p.peak_inflight},
                          {"peak_activation_bytes", p.activations},
                          {"optimizer_bytes", p.moments},
                          {"total_bytes", p.total()}};
        if (p.host > 0) s["predicted"]["host_bytes"] = p.host;  // offloaded: part of total_bytes
      }
      stages.push_back(s);
    }
    summary["stages"] = stages;
  }
  return summary;
}

// The outputs, the weights first: nothing after training (traces, evaluation) can lose them.
void write_outputs(const train_options& o, const run_plan& plan, const pipeline_result& run,
                   const param_set& weights, nlohmann::json& summary) {
  const pipeline_flags& f = o.pipe;
  if (!o.save.empty()) {
    metadata_map meta{{"pipeworks.model", to_json(plan.model).dump()},
                      {"pipeworks.steps", std::to_string(run.last.step)}};
    if (status s = save_params(o.save, weights, meta); !s)
      throw pipeworks_error(s.message() + "; the trained weights were not saved (check the disk "
                                          "space and permissions of --save's directory)");
    summary["checkpoint"] = o.save;
  }
  if (!f.trace.empty()) {
    if (status s = write_chrome_trace(run.trace, f.trace); !s) throw pipeworks_error(s.message());
    summary["trace"] = f.trace;
    if (f.compare_sim) compare_with_simulation(run, f.trace, o.json, summary);
  }
}

// The held-out loss (gpt) or test accuracy (mlp) into the summary; a gpt's sample, when asked.
std::string evaluate(const train_options& o, const run_plan& plan, const model<float>& net,
                     const param_set& weights, const minibatch& held_out, nlohmann::json& summary) {
  std::string sample;
  if (plan.model.is_gpt()) {
    auto loss = mean_loss(net, weights, held_out, 16);
    if (!loss) throw pipeworks_error(loss.message());
    summary["eval_loss"] = *loss;
    summary["eval_windows"] = held_out.inputs.dim(0);
    if (o.sample > 0) {
      sample = sample_text(net, weights, plan.model.gpt(), "\n",
                           {.bytes = o.sample, .temperature = o.temperature, .seed = o.seed});
      summary["sample"] = sample;
    }
  } else {
    auto acc = accuracy(net, weights, held_out, 1000);
    if (!acc) throw pipeworks_error(acc.message());
    summary["test_accuracy"] = *acc;
  }
  return sample;
}

// The end of the run for people: loss, throughput, evaluation, the stages' peaks, the sample and
// each output.
void print_report(const train_options& o, const run_plan& plan, const pipeline_result& run,
                  double samples_per_s, const minibatch& held_out, const nlohmann::json& summary,
                  const std::string& sample) {
  const pipeline_flags& f = o.pipe;
  const step_metrics& last = run.last;
  std::printf("final loss %.4f (training loss of step %lld), %.1f samples/s over %s\n", last.loss,
              static_cast<long long>(last.step), samples_per_s,
              format_duration(last.elapsed_s).c_str());
  if (plan.model.is_gpt())
    std::printf("held-out loss %.4f over %lld windows of %s\n", summary["eval_loss"].get<double>(),
                static_cast<long long>(held_out.inputs.dim(0)), plan.data.path.c_str());
  else
    std::printf("test accuracy %.2f%% on %lld images\n",
                100.0 * summary["test_accuracy"].get<double>(),
                static_cast<long long>(held_out.inputs.dim(0)));
  if (run.programs) {
    std::string versions, inflight;
    for (const stage_stats& st : run.stages) {
      versions += " " + std::to_string(st.peak_versions);
      inflight += " " + std::to_string(st.peak_inflight);
    }
    std::printf("stages 0..%zu: peak live weight versions%s; peak stashed microbatches%s\n",
                run.stages.size() - 1, versions.c_str(), inflight.c_str());
  }
  if (!sample.empty())
    std::printf("sample (%lld bytes, temperature %g):\n%s\n", static_cast<long long>(o.sample),
                o.temperature, printable(sample).c_str());
  if (!o.save.empty())
    std::printf("outputs: checkpoint %s (safetensors, Hugging Face names)\n", o.save.c_str());
  if (run.plan.checkpoint.every > 0)
    std::printf("outputs: checkpoints in %s every %lld steps (continue with --resume %s)\n",
                run.plan.checkpoint.dir.c_str(), static_cast<long long>(run.plan.checkpoint.every),
                run.plan.checkpoint.dir.c_str());
  if (!o.metrics.empty())
    std::printf("outputs: metrics %s (one JSON object per step, then the summary)\n",
                o.metrics.c_str());
  if (!f.trace.empty())
    std::printf("outputs: trace %s (Chrome trace: open it in https://ui.perfetto.dev)\n",
                f.trace.c_str());
  if (o.save.empty() && o.metrics.empty() && f.trace.empty() && run.plan.checkpoint.every == 0)
    std::printf(
        "outputs: none written (use --save FILE for the weights, --save-every N "
        "--checkpoint-dir DIR for checkpoints, --metrics FILE for the metrics)\n");
}

}  // namespace

std::string sim_trace_path(std::string path) {
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") path.resize(path.size() - 5);
  return path + ".sim.json";
}

void print_train_header(const run_plan& plan, const model<float>& net) {
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
      plan.model.name.c_str(), static_cast<long long>(net.param_count()), net.size(),
      plan.data.path.c_str(), static_cast<long long>(plan.train.steps), batch.c_str(),
      std::string(optimizer_kind_name(plan.train.optim.kind)).c_str(), plan.train.optim.lr,
      cpu_threads(), blas_core_name().c_str());
  // Where the ranks run, when not all on the CPU: "ranks on cuda:0" or "ranks on cpu, cuda:0 x3".
  std::vector<std::pair<std::string, int>> devices;
  for (const rank_placement& r : plan.ranks) {
    const std::string name = r.device.to_string();
    if (devices.empty() || devices.back().first != name) devices.push_back({name, 0});
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

// Resumed, the run adds its lines to those of the run it continues.
train_reporter::train_reporter(const train_options& o, const run_plan& plan, const model<float>& net)
    : o_(o), plan_(plan), net_(net), metrics_file_(o.metrics, plan.data.position > 0),
      progress_(stdout, o.json) {}

pipeline_callbacks train_reporter::callbacks() {
  pipeline_callbacks cb;
  cb.on_plan = [this](const run_plan& resolved, const std::string& report) -> status {
    if (!o_.json && !report.empty()) {
      std::fputs(report.c_str(), stdout);
      std::fflush(stdout);
    }
    if (plan_.auto_partition)  // 2BW chooses its own microbatch: check it fits
      try {
        check_train_memory(net_, plan_.model, resolved.data.batch,
                           resolved.data.batch / (resolved.train.microbatches * resolved.replicas),
                           "--planner", "the plan's microbatches do not fit; use --planner "
                           "pipedream, which keeps --batch / --microbatches");
      } catch (const CLI::ValidationError& e) {
        return make_error(e.what());
      }
    return {};
  };
  cb.on_step = [this](const step_metrics& m) {
    if (first_samples_ < 0) first_samples_ = m.samples - (m.samples_per_s * m.step_s);
    total_samples_s_ = m.elapsed_s > 0 ? static_cast<double>(m.samples - std::max<std::int64_t>(0, first_samples_)) / m.elapsed_s : 0;
    const std::string line = dump({{"step", m.step},
                                   {"loss", m.loss},
                                   {"lr", m.lr},
                                   {"grad_norm", m.grad_norm},
                                   {"samples_per_s", m.samples_per_s},
                                   {"elapsed_s", m.elapsed_s}});
    if (o_.json) std::cout << line << std::endl;
    metrics_file_.write_line(line);
    progress_.update({m.step, m.steps, m.loss, m.lr, m.samples_per_s, m.elapsed_s});
  };
  // A stop signal asks the run to stop; the driver then stops the stages and the weights are
  // saved. The handlers (stop_signals) stay until the command returns, so a second signal
  // cannot cut the save.
  cb.stop_requested = [] { return stop_signals::requested(); };
  return cb;
}

int report_run(const train_options& o, const run_plan& plan, const model<float>& net,
               const minibatch& held_out, const pipeline_result& run, train_reporter& reporter) {
  const param_set weights = final_weights(run);
  if (run.interrupted) return report_interrupted(o, plan, run, weights);
  nlohmann::json summary = run_summary(plan, run, reporter.samples_per_s());
  write_outputs(o, plan, run, weights, summary);
  const std::string sample = evaluate(o, plan, net, weights, held_out, summary);
  reporter.metrics().finish(dump(summary));
  if (o.json) {
    std::cout << dump(summary) << std::endl;
    return exit_ok;
  }
  print_report(o, plan, run, reporter.samples_per_s(), held_out, summary, sample);
  return exit_ok;
}

}  // namespace pipeworks::cli
