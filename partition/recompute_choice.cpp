// The recompute choice's report and the device profiles of one mode.
#include "partition/recompute_choice.hpp"

#include <algorithm>
#include <cstdio>

namespace pipeworks {

std::string format_mode_choice(const std::vector<mode_trial>& trials, const recompute_mode* chosen) {
  std::string out;
  for (const mode_trial& t : trials) {
    out += out.empty() ? "" : "; ";
    out += std::string(recompute_name(t.mode)) + ": ";
    if (t.fits) {
      char rate[64];
      std::snprintf(rate, sizeof rate, "%.1f samples/s", t.samples_per_s);
      out += rate;
    } else {
      out += "no plan fits (" + t.why + ")";
    }
  }
  out += chosen ? " -> " + std::string(recompute_name(*chosen)) : std::string(" -> none fits");
  return out;
}

result<std::map<std::string, model_profile>> device_profiles_in_mode(
    const std::map<std::string, model_profile>& device_profiles, recompute_mode mode) {
  std::map<std::string, model_profile> out;
  for (const auto& [name, p] : device_profiles) {
    const auto modes = profile_modes(p);
    if (std::find(modes.begin(), modes.end(), mode) == modes.end())
      return make_error("the device profile " + name + " was not measured in recompute " +
                        std::string(recompute_name(mode)) +
                        " (measure it with pipeworks profile --recompute all)");
    out.emplace(name, profile_in_mode(p, mode));
  }
  return out;
}

}  // namespace pipeworks
