// profile.json: writes a model_profile and reads it back, refusing missing, negative or
// non-finite fields with an error that names the field and the layer.
#include "partition/profile.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_read.hpp"

namespace pipeworks {

namespace {

using json = nlohmann::json;

const std::string prefix = "profile.json: ";

status need(const json& j, const char* key, const std::string& where, const std::string& what) {
  if (j.contains(key)) return {};
  return make_error(prefix + where + " has no \"" + key + "\"; give " + what);
}

status read_string(const json& j, const char* key, const std::string& where, std::string& out) {
  if (status st = need(j, key, where, "a string"); !st) return st;
  const json& v = j.at(key);
  if (!v.is_string()) {
    return make_error(prefix + where + "." + key + " must be a string, not " + v.dump());
  }
  out = v.get<std::string>();
  return {};
}

// A time in milliseconds: a finite number >= 0.
status read_ms(const json& j, const char* key, const std::string& where, double& out) {
  if (status st = need(j, key, where, "a time in milliseconds"); !st) return st;
  const json& v = j.at(key);
  if (!v.is_number()) {
    return make_error(prefix + where + "." + key + " must be a number of milliseconds, not " +
                      v.dump());
  }
  out = v.get<double>();
  if (!std::isfinite(out) || out < 0.0) {
    return make_error(prefix + where + "." + key + " " + v.dump() +
                      " must be a finite number of milliseconds >= 0");
  }
  return {};
}

// A whole number in min..2^62; `unit` says what it counts.
status read_whole(const json& j, const char* key, const std::string& where, std::int64_t min,
                  const std::string& unit, std::int64_t& out) {
  constexpr std::int64_t max = std::int64_t{1} << 62;
  if (status st = need(j, key, where, "a whole number of " + unit); !st) return st;
  const json& v = j.at(key);
  const std::string name = prefix + where + "." + key + " " + v.dump();
  const std::string range = " must be a whole number of " + unit + " in " + std::to_string(min) +
                            "..2^62";
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) return make_error(name + range);
    out = static_cast<std::int64_t>(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::abs(d) > static_cast<double>(max)) {
      return make_error(name + range);
    }
    out = static_cast<std::int64_t>(d);
  } else {
    return make_error(name + range);
  }
  if (out < min || out > max) return make_error(name + range);
  return {};
}

}  // namespace

status check_profile_totals(const model_profile& p) {
  struct field {
    const char* name;
    std::int64_t layer_profile::*bytes;
  };
  constexpr field fields[] = {{"activation_bytes", &layer_profile::activation_bytes},
                              {"saved_bytes", &layer_profile::saved_bytes},
                              {"param_bytes", &layer_profile::param_bytes},
                              {"optimizer_bytes", &layer_profile::optimizer_bytes}};
  for (const field& f : fields) {
    std::int64_t total = 0;
    for (std::size_t i = 0; i < p.layers.size(); ++i) {
      const layer_profile& l = p.layers[i];
      const std::string where = "layers[" + std::to_string(i) + "] (\"" + l.name + "\")";
      const std::int64_t v = l.*f.bytes;
      if (v < 0)
        return make_error("the profile's " + where + "." + f.name + " " + std::to_string(v) +
                          " is negative; give a whole number of bytes >= 0");
      // v is checked first, so total + v <= 2^51 cannot overflow.
      if (v > max_profile_total_bytes || total + v > max_profile_total_bytes)
        return make_error(std::string("the profile's total ") + f.name + " over layers[0.." +
                          std::to_string(i) + "] passes 2^50 bytes (about 1 PB) at " + where +
                          ", which has " + std::to_string(v) +
                          "; check the profile's units (bytes) or profile a smaller model");
      total += v;
    }
  }
  return {};
}

std::int64_t stash_product(std::int64_t k, std::int64_t bytes) {
  constexpr std::int64_t cap = max_profile_total_bytes << 12;
  if (k <= 0 || bytes <= 0) return 0;
  if (bytes > cap / k) return cap;
  return k * bytes;
}

std::string to_json(const model_profile& p) {
  using ordered_json = nlohmann::ordered_json;  // keys in the documented order
  ordered_json layers = ordered_json::array();
  for (const layer_profile& l : p.layers) {
    ordered_json o = ordered_json::object();
    o["name"] = l.name;
    o["fwd_ms"] = l.fwd_ms;
    o["bwd_ms"] = l.bwd_ms;
    o["activation_bytes"] = l.activation_bytes;
    o["saved_bytes"] = l.saved_bytes;
    o["param_bytes"] = l.param_bytes;
    o["optimizer_bytes"] = l.optimizer_bytes;
    layers.push_back(std::move(o));
  }
  ordered_json j = ordered_json::object();
  j["model"] = p.model;
  j["microbatch"] = p.microbatch;
  j["layers"] = std::move(layers);
  // nlohmann writes doubles in a form that reads back to the same value.
  return j.dump(2) + "\n";
}

result<model_profile> parse_profile(const std::string& json_text) {
  auto parsed = parse_json(json_text, "profile.json");
  if (!parsed) return parsed.err();
  const json& j = *parsed;
  PW_TRY(only_keys(j, prefix, "the top level", {"model", "microbatch", "layers"}));
  model_profile p;
  PW_TRY(read_string(j, "model", "the top level", p.model));
  PW_TRY(read_whole(j, "microbatch", "the top level", 1, "samples", p.microbatch));
  PW_TRY(need(j, "layers", "the top level", "a non-empty array of layer objects"));
  const json& ls = j.at("layers");
  if (!ls.is_array() || ls.empty()) {
    return make_error(prefix + "\"layers\" must be a non-empty array of layer objects, not " +
                      ls.dump());
  }
  for (std::size_t i = 0; i < ls.size(); ++i) {
    std::string where = "layers[" + std::to_string(i) + "]";
    const json& lj = ls[i];
    PW_TRY(only_keys(lj, prefix, where, {"name", "fwd_ms", "bwd_ms", "activation_bytes", "saved_bytes",
                                 "param_bytes", "optimizer_bytes"}));
    layer_profile l;
    PW_TRY(read_string(lj, "name", where, l.name));
    where += " (\"" + l.name + "\")";
    PW_TRY(read_ms(lj, "fwd_ms", where, l.fwd_ms));
    PW_TRY(read_ms(lj, "bwd_ms", where, l.bwd_ms));
    PW_TRY(read_whole(lj, "activation_bytes", where, 0, "bytes", l.activation_bytes));
    PW_TRY(read_whole(lj, "saved_bytes", where, 0, "bytes", l.saved_bytes));
    PW_TRY(read_whole(lj, "param_bytes", where, 0, "bytes", l.param_bytes));
    PW_TRY(read_whole(lj, "optimizer_bytes", where, 0, "bytes", l.optimizer_bytes));
    p.layers.push_back(std::move(l));
  }
  if (status st = check_profile_totals(p); !st) return make_error(prefix + st.message());
  return p;
}

result<model_profile> load_profile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return make_error("profile '" + path + "' is a directory; give the path of a profile.json file");
  }
  std::ifstream in(path);
  if (!in) return make_error("cannot open profile '" + path + "'; give the path of a profile.json");
  std::stringstream buf;
  buf << in.rdbuf();
  auto p = parse_profile(buf.str());
  if (p) return p;
  const std::string& m = p.message();
  return make_error(path + ": " + (m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m));
}

}  // namespace pipeworks
