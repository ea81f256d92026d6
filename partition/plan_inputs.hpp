// The checks both planners run on a profile and a cluster before they plan: figures past the
// bounds of profile.hpp and cluster.hpp are mistakes of units and would overflow a plan's times.
#pragma once
#include <map>
#include <string>

#include "base/result.hpp"
#include "partition/cluster.hpp"
#include "partition/profile.hpp"

namespace pipeworks {

// An error naming the first layer, device or level whose figure is out of bounds: a layer time
// outside 0..max_layer_ms (or NaN), a microbatch outside 1..max_profile_microbatch, a device speed
// outside min_device_speed..max_device_speed, a bandwidth below min_bandwidth_bytes_per_s or not
// finite, a latency outside 0..max_latency_s.
status check_plan_inputs(const model_profile& profile, const cluster& c);

// An error when device profile `p` (called `name`) is not of the model `base` profiles: other
// layers, another microbatch, another recompute mode, or a layer whose name, parameter, optimizer
// or activation bytes differ (named with the field). Times and saved bytes may differ: that is
// what it is for.
status check_same_model(const model_profile& base, const model_profile& p, const std::string& name);
// A device that names a profile not among `device_profiles`, or a device profile that fails
// check_same_model or check_plan_inputs: an error naming it.
status check_device_profiles(const model_profile& profile, const cluster& c,
                             const std::map<std::string, model_profile>& device_profiles);

// The profiles c's devices name, read relative to the folder of `cluster_file` (the file c was
// loaded from) unless absolute, keyed by the name the device gives; an error names the device.
result<std::map<std::string, model_profile>> load_device_profiles(const cluster& c,
                                                                  const std::string& cluster_file);

}  // namespace pipeworks
