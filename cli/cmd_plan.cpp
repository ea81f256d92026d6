// `pipeworks plan`: a partition plan from a profile and a cluster: the stages (layer ranges,
// replicas, devices), the bottleneck, the predicted step time and throughput, memory per device.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "partition/pipedream_planner.hpp"
#include "partition/two_bw_planner.hpp"

namespace pipeworks::cli {
namespace {

struct plan_options {
  std::string profile, cluster = "local-cpu", planner = "pipedream";
  int devices = 0;
  bool json = false;
};

// [{"first_layer", "last_layer", "replicas", "devices", "time_ms", "memory_bytes"}, ...]
nlohmann::json stages_json(const std::vector<planned_stage>& stages) {
  nlohmann::json out = nlohmann::json::array();
  for (const planned_stage& s : stages)
    out.push_back({{"first_layer", s.first_layer},
                   {"last_layer", s.last_layer},
                   {"replicas", s.replicas},
                   {"devices", s.devices},
                   {"time_ms", s.time_ms},
                   {"memory_bytes", s.memory_bytes}});
  return out;
}

std::string device_list(const std::vector<int>& devices) {
  std::string out;
  for (int d : devices) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

// The 2BW planner's choice: depth p, width w, microbatch b, microbatches m, and the stages.
int print_two_bw(const plan_options& o, const model_profile& prof, const cluster& c) {
  two_bw_options to;
  to.max_devices = o.devices;
  auto plan = plan_two_bw(prof, c, to);
  if (!plan) throw pipeworks_error(plan.message());
  if (o.json) {
    const nlohmann::json stages = stages_json(plan->stages);
    nlohmann::json j{{"stages", stages},         {"p", plan->p},
                     {"w", plan->w},             {"microbatch", plan->b},
                     {"m", plan->m},             {"predicted_step_ms", plan->step_ms},
                     {"samples_per_s", plan->throughput_samples_per_s},
                     {"simulated", plan->simulated},
                     {"memory_bytes", plan->memory_bytes}};
    std::cout << j.dump() << std::endl;
    return exit_ok;
  }
  std::printf("pipeworks plan: %s (%zu layers) on %s (%d devices), planner 2bw: p=%d stages x w=%d "
              "replicas, microbatch %lld, m=%d per step\n",
              prof.model.c_str(), prof.layers.size(), o.cluster.c_str(), c.device_count(), plan->p,
              plan->w, static_cast<long long>(plan->b), plan->m);
  std::printf("| stage | layers | replicas | devices | ms per microbatch | memory per device |\n");
  std::printf("|---:|---|---:|---|---:|---:|\n");
  for (std::size_t i = 0; i < plan->stages.size(); ++i) {
    const planned_stage& s = plan->stages[i];
    std::printf("| %zu | %s..%s | %d | %s | %.3f | %.1f MiB |\n", i,
                prof.layers[s.first_layer].name.c_str(), prof.layers[s.last_layer].name.c_str(),
                s.replicas, device_list(s.devices).c_str(), s.time_ms,
                static_cast<double>(s.memory_bytes) / (1 << 20));
  }
  std::printf("predicted step %.3f ms (%s): %.1f samples/s\n", plan->step_ms,
              plan->simulated ? "simulated" : "analytic", plan->throughput_samples_per_s);
  return exit_ok;
}

int run_plan(const plan_options& o) {
  auto prof = load_profile(o.profile);
  if (!prof) throw CLI::ValidationError("--profile", prof.message());
  auto c = load_cluster(o.cluster);
  if (!c) throw CLI::ValidationError("--cluster", c.message());
  if (o.planner == "2bw") return print_two_bw(o, *prof, *c);
  pipedream_options po;
  po.max_devices = o.devices;
  auto plan = plan_pipedream(*prof, *c, po);
  if (!plan) throw pipeworks_error(plan.message());
  const double samples_per_s =
      plan->bottleneck_ms > 0 ? 1000.0 * static_cast<double>(prof->microbatch) / plan->bottleneck_ms : 0;
  if (o.json) {
    const nlohmann::json stages = stages_json(plan->stages);
    nlohmann::json j{{"stages", stages},
                     {"bottleneck_ms", plan->bottleneck_ms},
                     {"predicted_step_ms", plan->predicted_step_ms},
                     {"samples_per_s", samples_per_s},
                     {"memory_bytes", plan->memory_bytes}};
    std::cout << j.dump() << std::endl;
    return exit_ok;
  }
  std::printf("pipeworks plan: %s (%zu layers, microbatch %lld) on %s (%d devices), planner %s\n",
              prof->model.c_str(), prof->layers.size(), static_cast<long long>(prof->microbatch),
              o.cluster.c_str(), c->device_count(), o.planner.c_str());
  std::printf("| stage | layers | replicas | devices | ms per microbatch | memory per device |\n");
  std::printf("|---:|---|---:|---|---:|---:|\n");
  for (std::size_t i = 0; i < plan->stages.size(); ++i) {
    const planned_stage& s = plan->stages[i];
    const std::string devs = device_list(s.devices);
    std::printf("| %zu | %s..%s | %d | %s | %.3f | %.1f MiB |\n", i,
                prof->layers[s.first_layer].name.c_str(), prof->layers[s.last_layer].name.c_str(),
                s.replicas, devs.c_str(), s.time_ms,
                static_cast<double>(s.memory_bytes) / (1 << 20));
  }
  std::printf("bottleneck %.3f ms per microbatch: %.1f samples/s in steady state; predicted step "
              "%.3f ms\n",
              plan->bottleneck_ms, samples_per_s, plan->predicted_step_ms);
  return exit_ok;
}

const bool registered = register_command(
    "plan", "Partition a profiled model over a cluster (PipeDream's or 2BW's planner)",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<plan_options>();
      sub.add_option("--profile", o->profile, "profile.json from `pipeworks profile`")->required();
      sub.add_option("--cluster", o->cluster,
                     "cluster.json, or a preset: dgx-h100x{N}, v100x{N}, local-cpu")
          ->capture_default_str();
      sub.add_option("--planner", o->planner,
                     "pipedream (stages, replicas per stage) or 2bw (depth, width, microbatch, m)")
          ->check(CLI::IsMember({"pipedream", "2bw"}))
          ->capture_default_str();
      sub.add_option("--devices", o->devices, "use at most this many devices (0: all)")
          ->check(nonnegative_int)
          ->capture_default_str();
      sub.add_flag("--json", o->json,
                   "{\"stages\": [{\"first_layer\", \"last_layer\", \"replicas\", \"devices\"}], "
                   "\"bottleneck_ms\", \"predicted_step_ms\", \"memory_bytes\"}");
      return [o] { return run_plan(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
