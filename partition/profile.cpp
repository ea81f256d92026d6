// profile.json: writes a model_profile and reads it back, refusing missing, negative or
// non-finite fields with an error that names the field and the layer.
#include "partition/profile.hpp"
#include "base/input_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_read.hpp"

namespace pipeworks {

namespace {

using json = nlohmann::json;

const std::string prefix = "profile.json: ";

const number_range milliseconds{.bound = number_range::non_negative, .unit = "milliseconds"};
const whole_range byte_count{.min = 0, .max = std::int64_t{1} << 62, .unit = "bytes"};

}  // namespace

int recompute_rank(recompute_mode m) {
  switch (m) {
    case recompute_mode::none: return 0;
    case recompute_mode::selective: return 1;
    case recompute_mode::full: return 2;
  }
  return 0;
}

std::vector<recompute_mode> profile_modes(const model_profile& p) {
  std::vector<recompute_mode> out{p.recompute};
  if (!p.layers.empty())
    for (const auto& [mode, figures] : p.layers.front().other_modes) out.push_back(mode);
  std::sort(out.begin(), out.end(),
            [](recompute_mode a, recompute_mode b) { return recompute_rank(a) < recompute_rank(b); });
  return out;
}

model_profile profile_in_mode(const model_profile& p, recompute_mode mode) {
  model_profile out = p;
  out.recompute = mode;
  for (layer_profile& l : out.layers) {
    if (mode != p.recompute) {
      const mode_figures& f = l.other_modes.at(mode);
      l.bwd_ms = f.bwd_ms;
      l.saved_bytes = f.saved_bytes;
    }
    l.other_modes.clear();
  }
  return out;
}

result<model_profile> merge_modes(model_profile base, const std::vector<model_profile>& others) {
  for (const model_profile& o : others) {
    const std::string mode(recompute_name(o.recompute));
    if (o.recompute == base.recompute || (!base.layers.empty() &&
                                          base.layers.front().other_modes.count(o.recompute)))
      return make_error("two profiles measured in recompute " + mode + ": give each mode once");
    if (o.microbatch != base.microbatch || o.layers.size() != base.layers.size())
      return make_error("the profile in recompute " + mode + " has " +
                        std::to_string(o.layers.size()) + " layers at microbatch " +
                        std::to_string(o.microbatch) + ", the first " +
                        std::to_string(base.layers.size()) + " at " +
                        std::to_string(base.microbatch) + ": profile the same model at one size");
    for (std::size_t i = 0; i < o.layers.size(); ++i) {
      if (o.layers[i].name != base.layers[i].name)
        return make_error("the profile in recompute " + mode + " names layers[" +
                          std::to_string(i) + "] \"" + o.layers[i].name + "\", the first \"" +
                          base.layers[i].name + "\": profile the same model");
      // A backward that recomputes does none's work and more: measured below none's, it is noise.
      const double bwd = base.recompute == recompute_mode::none
                             ? std::max(o.layers[i].bwd_ms, base.layers[i].bwd_ms)
                             : o.layers[i].bwd_ms;
      base.layers[i].other_modes[o.recompute] = {bwd, o.layers[i].saved_bytes};
    }
  }
  return base;
}

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
    if (l.largest_optimizer_bytes > 0) o["largest_optimizer_bytes"] = l.largest_optimizer_bytes;
    if (!l.other_modes.empty()) {
      ordered_json modes = ordered_json::object();
      for (recompute_mode m : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
        if (auto it = l.other_modes.find(m); it != l.other_modes.end()) {
          ordered_json f = ordered_json::object();
          f["bwd_ms"] = it->second.bwd_ms;
          f["saved_bytes"] = it->second.saved_bytes;
          modes[std::string(recompute_name(m))] = std::move(f);
        }
      o["modes"] = std::move(modes);
    }
    layers.push_back(std::move(o));
  }
  ordered_json j = ordered_json::object();
  j["model"] = p.model;
  j["microbatch"] = p.microbatch;
  j["recompute"] = std::string(recompute_name(p.recompute));
  j["layers"] = std::move(layers);
  // nlohmann writes doubles in a form that reads back to the same value.
  return j.dump(2) + "\n";
}

result<model_profile> parse_profile(const std::string& json_text) {
  auto parsed = parse_json(json_text, "profile.json");
  if (!parsed) return parsed.err();
  const json& j = *parsed;
  const json_where top{prefix, "the top level"};
  PW_TRY(only_keys(j, top, {"model", "microbatch", "recompute", "layers"}));
  model_profile p;
  PW_TRY(read_string(j, top, "model", p.model, presence::required));
  PW_TRY(read_whole(j, top, "microbatch", {.min = 1, .unit = "samples"}, p.microbatch,
                    presence::required));
  // "recompute" is optional: profiles written before it existed were measured without.
  if (j.contains("recompute")) {
    std::string mode;
    PW_TRY(read_string(j, top, "recompute", mode, presence::required));
    const auto m = parse_recompute(mode);
    if (!m)
      return make_error(prefix + "\"recompute\" is \"" + mode +
                        "\"; known: none, selective, full (the mode the profile was measured in)");
    p.recompute = *m;
  }
  PW_TRY(need_key(j, top, "layers", "a non-empty array of layer objects"));
  const json& ls = j.at("layers");
  if (!ls.is_array() || ls.empty()) {
    return make_error(prefix + "\"layers\" must be a non-empty array of layer objects, not " +
                      ls.dump());
  }
  if (ls.size() > max_profile_layers)
    return make_error(prefix + "\"layers\" has " + std::to_string(ls.size()) +
                      " entries; the planners split at most " + std::to_string(max_profile_layers) +
                      " layers (a model's blocks): profile a model of fewer blocks");
  for (std::size_t i = 0; i < ls.size(); ++i) {
    json_where at{prefix, "layers[" + std::to_string(i) + "]"};
    const json& lj = ls[i];
    PW_TRY(only_keys(lj, at, {"name", "fwd_ms", "bwd_ms", "activation_bytes", "saved_bytes",
                              "param_bytes", "optimizer_bytes", "largest_optimizer_bytes",
                              "modes"}));
    layer_profile l;
    PW_TRY(read_string(lj, at, "name", l.name, presence::required));
    at.path += " (\"" + l.name + "\")";
    PW_TRY(read_number(lj, at, "fwd_ms", milliseconds, l.fwd_ms, presence::required));
    PW_TRY(read_number(lj, at, "bwd_ms", milliseconds, l.bwd_ms, presence::required));
    PW_TRY(read_whole(lj, at, "activation_bytes", byte_count, l.activation_bytes,
                      presence::required));
    PW_TRY(read_whole(lj, at, "saved_bytes", byte_count, l.saved_bytes, presence::required));
    PW_TRY(read_whole(lj, at, "param_bytes", byte_count, l.param_bytes, presence::required));
    PW_TRY(read_whole(lj, at, "optimizer_bytes", byte_count, l.optimizer_bytes,
                      presence::required));
    if (lj.contains("largest_optimizer_bytes")) {
      PW_TRY(read_whole(lj, at, "largest_optimizer_bytes", byte_count, l.largest_optimizer_bytes,
                        presence::required));
      if (l.largest_optimizer_bytes > l.optimizer_bytes)
        return make_error(prefix + at.path + ".largest_optimizer_bytes " +
                          std::to_string(l.largest_optimizer_bytes) + " is more than the layer's " +
                          "optimizer_bytes " + std::to_string(l.optimizer_bytes) +
                          "; give at most that (the largest tensor's part of it)");
    }
    if (lj.contains("modes")) {
      const json& mj = lj.at("modes");
      if (!mj.is_object())
        return make_error(prefix + at.path + ".modes must be an object of modes ({\"selective\": "
                          "{\"bwd_ms\", \"saved_bytes\"}, \"full\": {..}}), not " + mj.dump());
      for (const auto& [key, fj] : mj.items()) {
        const auto m = parse_recompute(key);
        if (!m || *m == p.recompute)
          return make_error(prefix + at.path + ".modes names \"" + key + "\"; give the modes " +
                            "other than the profile's own \"" +
                            std::string(recompute_name(p.recompute)) +
                            "\" among none, selective, full");
        json_where fat{prefix, at.path + ".modes." + key};
        PW_TRY(only_keys(fj, fat, {"bwd_ms", "saved_bytes"}));
        mode_figures f;
        PW_TRY(read_number(fj, fat, "bwd_ms", milliseconds, f.bwd_ms, presence::required));
        PW_TRY(read_whole(fj, fat, "saved_bytes", byte_count, f.saved_bytes, presence::required));
        l.other_modes[*m] = f;
      }
    }
    if (i > 0) {
      auto names = [](const layer_profile& x) {
        std::string t;
        for (const auto& [m, f] : x.other_modes) t += (t.empty() ? "" : ", ") + std::string(recompute_name(m));
        return t.empty() ? std::string("none other") : t;
      };
      const layer_profile& first = p.layers.front();
      bool same = first.other_modes.size() == l.other_modes.size();
      for (const auto& [m, f] : first.other_modes) same = same && l.other_modes.count(m) > 0;
      if (!same)
        return make_error(prefix + at.path + " carries the modes " + names(l) + ", layers[0] " +
                          names(first) + ": every layer must carry the same modes");
    }
    p.layers.push_back(std::move(l));
  }
  for (recompute_mode m : profile_modes(p))
    if (status st = check_profile_totals(profile_in_mode(p, m)); !st)
      return make_error(prefix + st.message() +
                        (m == p.recompute ? "" : " (in recompute " + std::string(recompute_name(m)) + ")"));
  return p;
}

result<model_profile> load_profile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return make_error("profile '" + path + "' is a directory; give the path of a profile.json file");
  }
  auto text = read_input_text(path, json_input_limit, "profile");
  if (!text) return make_error(text.message() + "; give the path of a profile.json");
  auto p = parse_profile(*text);
  if (p) return p;
  const std::string& m = p.message();
  return make_error(path + ": " + (m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m));
}

}  // namespace pipeworks
