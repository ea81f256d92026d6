// check_plan_inputs (one pass over the layers, the devices and the levels) and the checks of
// device profiles against the plan's.
#include "partition/plan_inputs.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <string>

namespace pipeworks {
namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

status check_plan_inputs(const model_profile& profile, const cluster& c) {
  for (std::size_t l = 0; l < profile.layers.size(); ++l) {
    const layer_profile& x = profile.layers[l];
    for (const auto& [name, ms] : {std::pair{"fwd_ms", x.fwd_ms}, {"bwd_ms", x.bwd_ms}})
      if (!(ms >= 0) || !(ms <= max_layer_ms))
        return make_error("layer " + std::to_string(l) + " (" + x.name + "): " + name + " " +
                          number(ms) + " is outside 0..1e9 ms, where the layers' total time "
                          "stays finite; check the profile's units (milliseconds)");
  }
  if (profile.microbatch < 1 || profile.microbatch > max_profile_microbatch)
    return make_error("the profile's microbatch " + std::to_string(profile.microbatch) +
                      " is outside 1..2^31-1 samples; profile at a microbatch in that range");
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    const double s = c.devices[d].speed;
    if (!(s >= min_device_speed) || !(s <= max_device_speed))
      return make_error("device " + std::to_string(d) + " (" + c.devices[d].name + "): speed " +
                        number(s) + " must be in 1e-6..1e6 (1 is nominal; times are divided "
                        "by it)");
  }
  for (const cluster_level& lv : c.levels) {
    if (!(lv.bandwidth_bytes_per_s >= min_bandwidth_bytes_per_s) ||
        !std::isfinite(lv.bandwidth_bytes_per_s))
      return make_error("cluster level " + lv.name + ": bandwidth_bytes_per_s " +
                        number(lv.bandwidth_bytes_per_s) + " is too small or not finite: give at "
                        "least 1 byte per second (check the units)");
    if (!(lv.latency_s >= 0) || !(lv.latency_s <= max_latency_s))
      return make_error("cluster level " + lv.name + ": latency_s " + number(lv.latency_s) +
                        " is outside 0..1e6 seconds (check the units)");
  }
  return {};
}

status check_same_model(const model_profile& base, const model_profile& p, const std::string& name) {
  const std::string what = "device profile " + name + " (" + p.model + ")";
  if (p.layers.size() != base.layers.size())
    return make_error(what + " has " + std::to_string(p.layers.size()) + " layers, the plan's " +
                      std::to_string(base.layers.size()) +
                      ": profile the same model on every kind of device");
  if (p.microbatch != base.microbatch)
    return make_error(what + " was taken at microbatch " + std::to_string(p.microbatch) +
                      ", the plan's at " + std::to_string(base.microbatch) +
                      ": profile every kind of device at the same --microbatch");
  if (p.recompute != base.recompute)
    return make_error(what + " was measured with recompute " +
                      std::string(recompute_name(p.recompute)) + ", the plan's with " +
                      std::string(recompute_name(base.recompute)) +
                      ": a plan runs in one mode; profile every kind of device with the same "
                      "--recompute");
  for (std::size_t l = 0; l < p.layers.size(); ++l) {
    const layer_profile &a = base.layers[l], &b = p.layers[l];
    const char* field = a.name != b.name                         ? "name"
                        : a.param_bytes != b.param_bytes         ? "param_bytes"
                        : a.optimizer_bytes != b.optimizer_bytes ? "optimizer_bytes"
                        : a.activation_bytes != b.activation_bytes ? "activation_bytes"
                                                                   : nullptr;
    if (field)
      return make_error(what + ": layer " + std::to_string(l) + " (" + b.name + ") differs from " +
                        "the plan's profile in " + field +
                        ": profile the same model on every kind of device");
  }
  if (status s = check_profile_totals(p); !s) return make_error(what + ": " + s.message());
  return {};
}

result<std::map<std::string, model_profile>> load_device_profiles(const cluster& c,
                                                                  const std::string& cluster_file) {
  std::map<std::string, model_profile> out;
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    const device_spec& s = c.devices[d];
    if (s.profile.empty() || out.contains(s.profile)) continue;
    std::filesystem::path path(s.profile);
    if (path.is_relative()) path = std::filesystem::path(cluster_file).parent_path() / path;
    auto p = load_profile(path.string());
    if (!p) return make_error(device_label(c, static_cast<int>(d)) + "'s profile: " + p.message());
    out.emplace(s.profile, std::move(*p));
  }
  return out;
}

status check_device_profiles(const model_profile& profile, const cluster& c,
                             const std::map<std::string, model_profile>& device_profiles) {
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    const device_spec& s = c.devices[d];
    if (!s.profile.empty() && !device_profiles.contains(s.profile))
      return make_error(device_label(c, static_cast<int>(d)) + " names the profile " + s.profile +
                        ", which the planner was not given: pass it among the device profiles "
                        "(pipeworks plan reads the file the cluster names)");
  }
  for (const auto& [name, p] : device_profiles) {
    if (status s = check_same_model(profile, p, name); !s) return s;
    if (status s = check_plan_inputs(p, c); !s)
      return make_error("device profile " + name + ": " + s.message());
  }
  return {};
}

}  // namespace pipeworks
