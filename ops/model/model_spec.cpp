// Parsing --model values and JSON model files.
#include "ops/model/model_spec.hpp"
#include "base/input_file.hpp"

#include "base/json_read.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace pipeworks {
namespace {

result<int> positive_int(const nlohmann::json& j, const char* key, int fallback,
                         const std::string& where) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1 << 20))
    return make_error(where + ": \"" + key + "\" must be an integer in 1..1048576, got " +
                      v.dump());
  return v.get<int>();
}

// Parameters stay below 2^31, so every tensor's element count and offset fits an int.
constexpr double max_params = 2147483647.0;

status check_size(double params, const std::string& where, const char* lower) {
  if (params <= max_params) return {};
  char about[32];
  std::snprintf(about, sizeof about, params < 1e15 ? "%.0f" : "%.3g", params);
  return make_error(where + ": about " + std::string(about) +
                    " parameters, more than the 2147483647 pipeworks trains; lower " + lower);
}

}  // namespace

result<model_spec> model_spec_from_json(const nlohmann::json& j, std::string name) {
  if (!j.is_object()) return make_error(name + ": expected a JSON object");
  if (j.contains("type") && !j["type"].is_string())
    return make_error(name + ": \"type\" must be \"gpt\" or \"mlp\", not " + j["type"].dump());
  std::string type = j.value("type", std::string{});
  if (type == "gpt") {
    for (const auto& [k, v] : j.items())
      if (k != "type" && k != "context" && k != "layers" && k != "heads" && k != "width" &&
          k != "vocab")
        return make_error(name + ": unknown key \"" + k +
                          "\" for a gpt (known: context, layers, heads, width, vocab)");
    gpt_config c = gpt_tiny();
    for (auto [key, field] : {std::pair{"context", &c.context},
                              {"layers", &c.layers},
                              {"heads", &c.heads},
                              {"width", &c.width},
                              {"vocab", &c.vocab}}) {
      auto v = positive_int(j, key, *field, name);
      if (!v) return v.err();
      *field = *v;
    }
    if (c.width % c.heads != 0)
      return make_error(name + ": width " + std::to_string(c.width) +
                        " is not a multiple of heads " + std::to_string(c.heads));
    if (c.vocab != 256) return make_error(name + ": the byte-level gpt needs vocab 256");
    const double C = c.width;
    const double params = 2.0 * c.vocab * C + c.context * C + c.layers * (12 * C * C + 13 * C);
    if (status s = check_size(params, name, "width, layers or context"); !s)
      return make_error(s.message());
    // No silent defaults for the shape: a key left out is named (vocab alone may be, 256).
    for (const char* key : {"context", "layers", "heads", "width"})
      if (!j.contains(key))
        return make_error(name + ": \"" + key + "\" is missing; a gpt needs context, layers, "
                          "heads and width (vocab is 256)");
    return model_spec{std::move(name), c};
  }
  if (type == "mlp") {
    for (const auto& [k, v] : j.items())
      if (k != "type" && k != "hidden" && k != "inputs" && k != "classes")
        return make_error(name + ": unknown key \"" + k +
                          "\" for an mlp (known: hidden, inputs, classes)");
    mlp_config c;
    if (j.contains("hidden")) {
      const auto& h = j.at("hidden");
      if (!h.is_array()) return make_error(name + ": \"hidden\" must be an array of widths");
      c.hidden.clear();
      for (const auto& v : h) {
        if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1 << 20))
          return make_error(name + ": \"hidden\" widths must be integers in 1..1048576, got " +
                            v.dump());
        c.hidden.push_back(v.get<int>());
      }
    }
    for (auto [key, field] : {std::pair{"inputs", &c.inputs}, {"classes", &c.classes}}) {
      auto v = positive_int(j, key, *field, name);
      if (!v) return v.err();
      *field = *v;
    }
    double params = 0, in = c.inputs;
    for (int h : c.hidden) params += in * h + h, in = h;
    params += in * c.classes + c.classes;
    if (status s = check_size(params, name, "the hidden widths"); !s)
      return make_error(s.message());
    return model_spec{std::move(name), c};
  }
  return make_error(name + ": \"type\" must be \"gpt\" or \"mlp\"");
}

result<model_spec> parse_model_spec(std::string_view arg) {
  if (arg == "mlp") return model_spec{"mlp", mlp_config{}};
  if (arg == "gpt-tiny") return model_spec{"gpt-tiny", gpt_tiny()};
  if (arg == "gpt-small") return model_spec{"gpt-small", gpt_small()};
  std::string path(arg);
  if (!path.ends_with(".json") && !std::filesystem::is_regular_file(path))
    return make_error("unknown model '" + path +
                      "' (expected mlp, gpt-tiny, gpt-small or a JSON file)");
  auto read = read_input_text(path, json_input_limit, "model file");
  if (!read) return make_error(read.message() + "; give mlp, gpt-tiny, gpt-small or a model's JSON file");
  const std::string& text = *read;
  if (status deep = check_json_depth(text, path); !deep) return make_error(deep.message());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error(path + ": not valid JSON");
  return model_spec_from_json(j, path);
}

nlohmann::json to_json(const model_spec& spec) {
  if (spec.is_gpt()) {
    const gpt_config& c = spec.gpt();
    return {{"type", "gpt"},    {"context", c.context}, {"layers", c.layers},
            {"heads", c.heads}, {"width", c.width},     {"vocab", c.vocab}};
  }
  const mlp_config& c = spec.mlp();
  return {{"type", "mlp"}, {"inputs", c.inputs}, {"hidden", c.hidden}, {"classes", c.classes}};
}

template <class T>
model<T> build_model(const model_spec& spec) {
  return spec.is_gpt() ? make_gpt<T>(spec.gpt()) : make_mlp<T>(spec.mlp());
}

template model<float> build_model<float>(const model_spec&);
template model<double> build_model<double>(const model_spec&);

}  // namespace pipeworks
