// A model's per-layer profile: forward and backward time, activation, saved, parameter and
// optimizer-state bytes at one microbatch size; the planners' input, read from and written to
// profile.json.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/result.hpp"

namespace pipeworks {

struct layer_profile {
  std::string name;
  double fwd_ms = 0;
  double bwd_ms = 0;
  std::int64_t activation_bytes = 0;  // the layer's output, sent to the next stage
  std::int64_t saved_bytes = 0;       // kept from forward to backward
  std::int64_t param_bytes = 0;
  std::int64_t optimizer_bytes = 0;
};

struct model_profile {
  std::string model;
  std::int64_t microbatch = 1;  // samples per microbatch the times were taken at
  std::vector<layer_profile> layers;
};

// {"model": .., "microbatch": .., "layers": [{"name": .., "fwd_ms": .., "bwd_ms": ..,
//  "activation_bytes": .., "saved_bytes": .., "param_bytes": .., "optimizer_bytes": ..}, ...]}
std::string to_json(const model_profile& p);
// An error names the field and the layer when something is missing, negative or not finite.
result<model_profile> parse_profile(const std::string& json_text);
result<model_profile> load_profile(const std::string& path);

}  // namespace pipeworks
