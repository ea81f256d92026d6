// check_plan_inputs: one pass over the layers, the devices and the levels.
#include "partition/plan_inputs.hpp"

#include <cmath>
#include <cstdio>
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

}  // namespace pipeworks
