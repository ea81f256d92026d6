// `pipeworks plan`: a partition plan from a profile and a cluster: the stages (layer ranges,
// replicas, devices: with names and speeds for a device list), the bottleneck, the predicted
// step time and throughput, memory per device, and the recompute mode the run must use (the
// profile's: the planners count each stage's memory as the runtime holds it in that mode).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/plan_v.hpp"
#include "cli/options.hpp"
#include "cli/progress_line.hpp"
#include "partition/pipedream_planner.hpp"
#include "partition/plan_inputs.hpp"
#include "partition/plan_progress.hpp"
#include "partition/two_bw_planner.hpp"

namespace pipeworks::cli {
namespace {

struct plan_options {
  std::string profile, cluster = "local-cpu", planner = "pipedream";
  std::string schedule;   // --planner v: the V schedule
  int microbatches = 0;   // --planner v: m per step
  int devices = 0;
  bool json = false, progress = false;
};

// [{"first_layer", "last_layer", "replicas", "devices", "time_ms", "memory_bytes"}, ...], with
// "device_names" (device_label: the name, or "device <d>" when it has none) and "device_speeds"
// when the cluster is a list of devices.
nlohmann::json stages_json(const std::vector<planned_stage>& stages, const cluster& c) {
  nlohmann::json out = nlohmann::json::array();
  for (const planned_stage& s : stages) {
    nlohmann::json j{{"first_layer", s.first_layer},
                     {"last_layer", s.last_layer},
                     {"replicas", s.replicas},
                     {"devices", s.devices},
                     {"time_ms", s.time_ms},
                     {"memory_bytes", s.memory_bytes}};
    if (!c.devices.empty()) {
      nlohmann::json names = nlohmann::json::array(), speeds = nlohmann::json::array();
      for (int d : s.devices) {
        names.push_back(device_label(c, d));
        speeds.push_back(c.devices[static_cast<std::size_t>(d)].speed);
      }
      j["device_names"] = std::move(names);
      j["device_speeds"] = std::move(speeds);
    }
    out.push_back(std::move(j));
  }
  return out;
}

// The "memory_bytes" of 2BW's --json, built from its stages: indexed by the cluster's device
// number, entry d is device d's estimate and 0 for a device the plan does not use; it ends at the
// highest-numbered device used (PipeDream's plan carries the same vector, pipeline_plan::memory_bytes).
std::vector<std::int64_t> memory_by_device(const std::vector<planned_stage>& stages) {
  std::vector<std::int64_t> out;
  for (const planned_stage& s : stages)
    for (int d : s.devices) {
      if (out.size() <= static_cast<std::size_t>(d)) out.resize(static_cast<std::size_t>(d) + 1, 0);
      out[static_cast<std::size_t>(d)] = s.memory_bytes;
    }
  return out;
}

// {"recompute": mode, "zero": level}: the run plan's runtime fields a plan from this profile sets
// (the profile's mode: the memory the planner counted assumes the run recomputes as it was
// measured; the ZeRO level it counted the optimizer state with).
nlohmann::json runtime_json(recompute_mode mode, int zero = 0) {
  return {{"recompute", std::string(recompute_name(mode))}, {"zero", zero}};
}

// How the run must recompute, for people: "" for none from a profile of one mode. With a profile
// of several modes, each mode's outcome and the planner's choice.
std::string recompute_line(recompute_mode mode, const std::string& choice) {
  const std::string name(recompute_name(mode));
  if (!choice.empty())
    return "recompute: " + choice + "\nmemory counted with recompute " + name +
           ", the planner's choice: train with --recompute " + name + "\n";
  if (mode == recompute_mode::none) return "";
  return "memory counted with recompute " + name +
         ", as the profile was measured: train with --recompute " + name + "\n";
}

// The sharing of the optimizer state a plan counted, for people: "" without ZeRO. `over` says
// over which replicas ("each stage's 4 replicas").
std::string zero_line(int zero, const std::string& over) {
  if (zero == 0) return "";
  return "optimizer state shared out over " + over +
         " (a faster plan fits with it than without): train with --zero " + std::to_string(zero) +
         "\n";
}

// The JSON's "recompute_choice" (the report of choose_recompute) when the profile has several modes.
void add_choice(nlohmann::json& j, const std::string& choice) {
  if (!choice.empty()) j["recompute_choice"] = choice;
}

// "0,1" on a hierarchy; "fast0 (speed 0.5), fast1 (speed 0.5)" on a list of devices.
std::string device_list(const std::vector<int>& devices, const cluster& c) {
  std::string out;
  for (int d : devices) {
    out += out.empty() ? "" : (c.devices.empty() ? "," : ", ");
    if (c.devices.empty()) {
      out += std::to_string(d);
    } else {
      char speed[32];
      std::snprintf(speed, sizeof speed, "%g", c.devices[static_cast<std::size_t>(d)].speed);
      out += device_label(c, d) + " (speed " + speed + ")";
    }
  }
  return out;
}

// The stage table both planners print.
void print_stages(const model_profile& prof, const cluster& c,
                  const std::vector<planned_stage>& stages) {
  std::printf("| stage | layers | replicas | devices | ms per microbatch | memory per device |\n");
  std::printf("|---:|---|---:|---|---:|---:|\n");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const planned_stage& s = stages[i];
    std::printf("| %zu | %s..%s | %d | %s | %.3f | %.1f MiB |\n", i,
                prof.layers[s.first_layer].name.c_str(), prof.layers[s.last_layer].name.c_str(),
                s.replicas, device_list(s.devices, c).c_str(), s.time_ms,
                static_cast<double>(s.memory_bytes) / (1 << 20));
  }
}

// The 2BW planner's choice: depth p, width w, microbatch b, microbatches m, and the stages.
int print_two_bw(const plan_options& o, const model_profile& prof, const cluster& c,
                 std::map<std::string, model_profile> device_profiles) {
  two_bw_options to;
  to.max_devices = o.devices;
  to.device_profiles = std::move(device_profiles);
  auto plan = plan_two_bw(prof, c, to);
  if (!plan) throw pipeworks_error(plan.message());
  if (o.json) {
    const nlohmann::json stages = stages_json(plan->stages, c);
    nlohmann::json j{{"stages", stages},         {"p", plan->p},
                     {"w", plan->w},             {"microbatch", plan->b},
                     {"m", plan->m},             {"bottleneck_ms", plan->bottleneck_ms},
                     {"predicted_step_ms", plan->step_ms},
                     {"samples_per_s", plan->throughput_samples_per_s},
                     {"simulated", plan->simulated},
                     {"memory_bytes", memory_by_device(plan->stages)},
                     {"runtime", runtime_json(plan->recompute, plan->zero)}};
    add_choice(j, plan->recompute_choice);
    std::cout << j.dump() << std::endl;
    return exit_ok;
  }
  std::printf("pipeworks plan: %s (%zu layers) on %s (%d devices), planner 2bw: p=%d stages x w=%d "
              "replicas, microbatch %lld, m=%d per step\n",
              prof.model.c_str(), prof.layers.size(), o.cluster.c_str(), c.device_count(), plan->p,
              plan->w, static_cast<long long>(plan->b), plan->m);
  print_stages(prof, c, plan->stages);
  std::printf("predicted step %.3f ms (%s): %.1f samples/s\n", plan->step_ms,
              plan->simulated ? "simulated" : "analytic", plan->throughput_samples_per_s);
  std::fputs(recompute_line(plan->recompute, plan->recompute_choice).c_str(), stdout);
  std::fputs(zero_line(plan->zero, "each stage's " + std::to_string(plan->w) + " replicas").c_str(),
             stdout);
  return exit_ok;
}

int run_plan(const plan_options& o) {
  // Large plans take seconds: a status line on stderr after the first two (--progress: at once).
  progress_line line("pipeworks plan", o.progress);
  plan_progress_scope scope([&](const plan_progress& p) { line.report(p.what, p.done, p.total); });
  auto prof = load_profile(o.profile);
  if (!prof) throw CLI::ValidationError("--profile", prof.message());
  auto c = load_cluster(o.cluster);
  if (!c) throw CLI::ValidationError("--cluster", c.message());
  pipedream_options po;
  po.max_devices = o.devices;
  po.max_zero = 1;  // ZeRO 1 when only it makes a faster plan fit, as 2BW's planner
  // Devices that name a profile measured on them (a GPU's): read beside the cluster file.
  auto own = load_device_profiles(*c, o.cluster);
  if (!own) throw CLI::ValidationError("--cluster", own.message());
  po.device_profiles = std::move(*own);
  // The inputs' own figures, checked before planning: a bad one is a bad input (exit 2).
  if (status st = check_plan_inputs(*prof, *c); !st) {
    const bool of_profile = st.message().rfind("layer ", 0) == 0 || st.message().rfind("the profile", 0) == 0;
    throw CLI::ValidationError(of_profile ? "--profile" : "--cluster", st.message());
  }
  if (status st = check_device_profiles(*prof, *c, po.device_profiles); !st)
    throw CLI::ValidationError("--cluster", st.message());
  if (o.planner == "2bw") return print_two_bw(o, *prof, *c, std::move(po.device_profiles));
  if (o.planner == "v") {
    auto kind = parse_schedule_kind(o.schedule);
    if (o.schedule.empty() || !kind || !v_planned(*kind))
      throw CLI::ValidationError("--schedule", "--planner v plans a V schedule: give --schedule "
                                               "zbv, v-half, v-min, dualpipev or dualpipe");
    if (o.microbatches < 1)
      throw CLI::ValidationError("--microbatches", "--planner v needs the microbatches per step "
                                                   "(the schedule's stash depends on them)");
    return print_v_plan(*prof, *c, o.cluster, *kind, o.microbatches, o.devices, o.json);
  }
  if (!o.schedule.empty() || o.microbatches > 0)
    throw CLI::ValidationError(o.schedule.empty() ? "--microbatches" : "--schedule",
                               "is for --planner v (the V schedules); the " + o.planner +
                                   " planner chooses its own");
  // A list of devices is planned with each device's own speed, memory and profile.
  auto plan = plan_pipedream(*prof, *c, po);
  if (!plan) throw pipeworks_error(plan.message());
  const double samples_per_s =
      plan->bottleneck_ms > 0 ? 1000.0 * static_cast<double>(prof->microbatch) / plan->bottleneck_ms : 0;
  if (o.json) {
    const nlohmann::json stages = stages_json(plan->stages, *c);
    nlohmann::json j{{"stages", stages},
                     {"bottleneck_ms", plan->bottleneck_ms},
                     {"predicted_step_ms", plan->predicted_step_ms},
                     {"samples_per_s", samples_per_s},
                     {"memory_bytes", plan->memory_bytes},
                     {"runtime", runtime_json(plan->recompute, plan->zero)}};
    add_choice(j, plan->recompute_choice);
    std::cout << j.dump() << std::endl;
    return exit_ok;
  }
  std::printf("pipeworks plan: %s (%zu layers, microbatch %lld) on %s (%d devices), planner %s\n",
              prof->model.c_str(), prof->layers.size(), static_cast<long long>(prof->microbatch),
              o.cluster.c_str(), c->device_count(), o.planner.c_str());
  print_stages(*prof, *c, plan->stages);
  std::printf("bottleneck %.3f ms per microbatch: %.1f samples/s in steady state; predicted step "
              "%.3f ms\n",
              plan->bottleneck_ms, samples_per_s, plan->predicted_step_ms);
  std::fputs(recompute_line(plan->recompute, plan->recompute_choice).c_str(), stdout);
  std::fputs(zero_line(plan->zero, "the replicas of each replicated stage").c_str(), stdout);
  return exit_ok;
}

const bool registered = register_command(
    "plan", "Partition a profiled model over a cluster (PipeDream's, 2BW's or the V planner)",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<plan_options>();
      sub.add_option("--profile", o->profile, "profile.json from `pipeworks profile`")->required();
      sub.add_option("--cluster", o->cluster,
                     "cluster.json, or a preset: dgx-h100x{N}, v100x{N}, local-cpu")
          ->capture_default_str();
      sub.add_option("--planner", o->planner,
                     "pipedream (stages, replicas per stage), 2bw (depth, width, microbatch, m) "
                     "or v (--schedule zbv|v-half|v-min|dualpipev: 2p pieces, device d running "
                     "pieces d and 2p-1-d, and the device count p)")
          ->check(CLI::IsMember({"pipedream", "2bw", "v"}))
          ->capture_default_str();
      sub.add_option("--schedule", o->schedule,
                     "with --planner v: the V schedule to plan (zbv, v-half, v-min, dualpipev)");
      sub.add_option("--microbatches", o->microbatches,
                     "with --planner v: microbatches per step")
          ->check(nonnegative_int);
      sub.add_option("--devices", o->devices, "use at most this many devices (0: all)")
          ->check(nonnegative_int)
          ->capture_default_str();
      sub.add_flag("--progress", o->progress,
                   "report every probe of the planner's search on stderr (without it, a status "
                   "line appears once a plan has taken two seconds)");
      sub.add_flag("--json", o->json,
                   "{\"stages\": [{\"first_layer\", \"last_layer\", \"replicas\", \"devices\", "
                   "\"time_ms\", \"memory_bytes\"}], \"bottleneck_ms\" (2bw: \"p\", \"w\", "
                   "\"microbatch\", \"m\", \"simulated\"), \"predicted_step_ms\", "
                   "\"samples_per_s\", \"memory_bytes\": one entry per device number d (device d's "
                   "estimate in bytes, 0 when unused, up to the highest device used), "
                   "\"runtime\": {\"recompute\": the profile's mode, or with a profile of several modes "
                   "(pipeworks profile --recompute all) the one the planner chose, which the run "
                   "must use, \"zero\": the ZeRO level the planner counted the optimizer state with, 1 "
                   "when only sharing it over a stage's replicas makes a faster plan fit}, "
                   "\"recompute_choice\" (several modes only: each mode's samples/s or "
                   "why no plan fits, and the choice)}");
      return [o] { return run_plan(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
