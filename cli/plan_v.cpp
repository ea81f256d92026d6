// The V plan printed: each device's two pieces, its time and memory, the bottleneck, the simulated
// step, and the train flags (--schedule, --stages, --microbatches, --split); see plan_v.hpp.
#include "cli/plan_v.hpp"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "cli/command.hpp"
#include "partition/v_planner.hpp"

namespace pipeworks::cli {

int print_v_plan(const model_profile& profile, const cluster& c, const std::string& cluster_name,
                 schedule_kind kind, int microbatches, int max_devices, bool json) {
  auto choice = plan_v_devices(profile, c, kind, microbatches, max_devices);
  if (!choice) throw pipeworks_error("the V planner: " + choice.message());
  const v_plan& plan = choice->plan;
  const int p = choice->devices;
  const std::vector<int>& b = plan.boundaries;
  // A V cuts the model into 2p pieces, device d holding d and 2p-1-d; dualpipe into p, device d
  // holding d and p-1-d (its virtual stage s, on route s / p, runs piece s % p).
  const bool mirrored = kind == schedule_kind::dualpipe;
  const int pieces = mirrored ? p : 2 * p;
  std::string split;  // the first layer (block) of each piece
  for (int s = 0; s < pieces; ++s)
    split += (s ? "," : "") + std::to_string(b[static_cast<std::size_t>(s)]);
  const std::string name(schedule_name(kind));
  const double samples_per_s =
      choice->step_ms > 0 ? 1000.0 * static_cast<double>(profile.microbatch * microbatches) /
                                choice->step_ms
                          : 0;
  if (json) {
    nlohmann::json stages = nlohmann::json::array();
    for (int s = 0; s < 2 * p; ++s) {
      const auto piece = static_cast<std::size_t>(s % pieces);
      stages.push_back({{"virtual_stage", s},
                        {"device", s < p ? s : 2 * p - 1 - s},
                        {"cluster_device",
                         plan.placement[static_cast<std::size_t>(s < p ? s : 2 * p - 1 - s)]},
                        {"first_layer", b[piece]},
                        {"last_layer", b[piece + 1] - 1},
                        {"in_flight", plan.in_flight[static_cast<std::size_t>(s)]}});
    }
    nlohmann::json j{{"schedule", name},
                     {"p", p},
                     {"m", microbatches},
                     {"stages", stages},
                     {"device_ms", plan.device_ms},
                     {"memory_bytes", plan.device_bytes},
                     {"bottleneck_ms", plan.bottleneck_ms},
                     {"predicted_step_ms", choice->step_ms},
                     {"samples_per_s", samples_per_s},
                     {"split", split},
                     {"runtime", {{"recompute", std::string(recompute_name(profile.recompute))},
                                  {"zero", 0}}}};
    std::cout << j.dump() << std::endl;
    return exit_ok;
  }
  std::printf("pipeworks plan: %s (%zu layers, microbatch %lld) on %s (%d devices), planner v: "
              "%s over p=%d devices (%s d and %d-d on device d), m=%d per step\n",
              profile.model.c_str(), profile.layers.size(),
              static_cast<long long>(profile.microbatch), cluster_name.c_str(), c.device_count(),
              name.c_str(), p, mirrored ? "stages" : "virtual stages", pieces - 1, microbatches);
  std::printf("| device | layers down | layers up | ms per microbatch | memory |\n");
  std::printf("|---:|---|---|---:|---:|\n");
  auto layers = [&](int s) {
    return profile.layers[static_cast<std::size_t>(b[static_cast<std::size_t>(s)])].name + ".." +
           profile.layers[static_cast<std::size_t>(b[static_cast<std::size_t>(s) + 1] - 1)].name;
  };
  for (int d = 0; d < p; ++d)
    std::printf("| %s | %s | %s | %.3f | %.1f MiB |\n",
                device_label(c, plan.placement[static_cast<std::size_t>(d)]).c_str(),
                layers(d).c_str(), layers(pieces - 1 - d).c_str(),
                plan.device_ms[static_cast<std::size_t>(d)],
                static_cast<double>(plan.device_bytes[static_cast<std::size_t>(d)]) / (1 << 20));
  std::printf("bottleneck %.3f ms per microbatch; predicted step %.3f ms (simulated): %.1f "
              "samples/s\n",
              plan.bottleneck_ms, choice->step_ms, samples_per_s);
  std::printf("train with --schedule %s --stages %d --microbatches %d --split %s\n", name.c_str(),
              p, microbatches, split.c_str());
  if (profile.recompute != recompute_mode::none)
    std::printf("memory counted with recompute %s, as the profile was measured: train with "
                "--recompute %s\n",
                std::string(recompute_name(profile.recompute)).c_str(),
                std::string(recompute_name(profile.recompute)).c_str());
  return exit_ok;
}

}  // namespace pipeworks::cli
