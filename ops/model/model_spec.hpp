// model_spec: which model to build, from a name (mlp, gpt-tiny, gpt-small) or a JSON file such
// as models/gpt-mini.json: {"type": "gpt", "context": 64, "layers": 4, "heads": 4, "width": 128}
// or {"type": "mlp", "hidden": [256, 128]}.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "base/result.hpp"

namespace pipeworks {

struct model_spec {
  std::string name;  // "mlp", "gpt-small", or the JSON file's path
  std::variant<mlp_config, gpt_config> config;

  bool is_gpt() const { return std::holds_alternative<gpt_config>(config); }
  const gpt_config& gpt() const { return std::get<gpt_config>(config); }
  const mlp_config& mlp() const { return std::get<mlp_config>(config); }
};

// A named model, or a path to a JSON file (anything ending in .json or naming a file).
result<model_spec> parse_model_spec(std::string_view arg);
result<model_spec> model_spec_from_json(const nlohmann::json& j, std::string name);
nlohmann::json to_json(const model_spec& spec);

template <class T>
model<T> build_model(const model_spec& spec);

}  // namespace pipeworks
