// The simulator's cost model: checks, derived REDUCE times and the costs.json reader.
#include "runtime/cost_model.hpp"
#include "base/input_file.hpp"

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_read.hpp"

namespace pipeworks {

namespace {

using json = nlohmann::json;

bool finite_nonneg(double x) { return std::isfinite(x) && x >= 0.0; }

std::string num(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

const std::string prefix = "costs.json: ";

// Times, speeds and link figures are read as any finite number; check() refuses the bad ones, for
// models built in code too.
const number_range any_number{};
const whole_range byte_count{.min = 0, .max = max_cost_bytes, .unit = "bytes"};
const whole_range device_number{.min = 0, .max = INT_MAX, .note = "a device number"};

result<link_cost> read_link(const json& j, const json_where& at, bool with_ends,
                            link_cost out = {}) {
  if (with_ends) {
    PW_TRY(only_keys(j, at, {"latency", "bandwidth", "from", "to"}));
  } else {
    PW_TRY(only_keys(j, at, {"latency", "bandwidth"}));
  }
  PW_TRY(read_number(j, at, "latency", any_number, out.latency));
  PW_TRY(read_number(j, at, "bandwidth", any_number, out.bandwidth));
  return out;
}

status check_link(const link_cost& l, const std::string& where) {
  if (!finite_nonneg(l.latency)) {
    return make_error("cost model: " + where + " latency " + num(l.latency) +
                      " must be finite and >= 0");
  }
  if (!(l.bandwidth > 0.0)) {
    return make_error("cost model: " + where + " bandwidth " + num(l.bandwidth) +
                      " must be > 0 bytes/s (leave it out for an infinitely fast link)");
  }
  return {};
}

status check_stage(const stage_cost& c, const std::string& where) {
  for (auto [name, x] : {std::pair{"forward", c.forward}, {"backward", c.backward},
                         {"weight_grad", c.weight_grad}, {"step", c.step}}) {
    if (!finite_nonneg(x)) {
      return make_error("cost model: " + where + " " + name + " time " + num(x) +
                        " must be finite and >= 0");
    }
  }
  if (c.weight_grad > c.backward) {
    return make_error("cost model: " + where + " weight_grad " + num(c.weight_grad) +
                      " exceeds backward " + num(c.backward) +
                      "; W is part of B (I = B - W), so give W <= B");
  }
  if (!std::isfinite(c.reduce)) {
    return make_error("cost model: " + where + " reduce time must be finite");
  }
  for (auto [name, b] : {std::pair{"activation_bytes", c.activation_bytes},
                         {"boundary_bytes", c.boundary_bytes}, {"param_bytes", c.param_bytes}}) {
    if (b < 0 || b > max_cost_bytes) {
      return make_error("cost model: " + where + " " + name + " " + std::to_string(b) +
                        " must be in 0..2^62");
    }
  }
  return {};
}

// A message over `l` takes boundary_bytes / bandwidth; that must stay finite.
status check_transfer(const link_cost& l, const std::string& link_name, const stage_cost& c,
                      const std::string& where) {
  const double t = l.transfer(c.boundary_bytes);
  if (std::isfinite(t)) return {};
  return make_error("cost model: " + where + " boundary_bytes " + std::to_string(c.boundary_bytes) +
                    " over " + link_name + " bandwidth " + num(l.bandwidth) +
                    " takes an infinite time; raise the bandwidth or lower the bytes");
}

}  // namespace

const link_cost& cost_model::link_between(int a, int b) const {
  for (const auto& l : links) {
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) return l.cost;
  }
  return link;
}

double cost_model::reduce_time(int s, int replicas) const {
  if (replicas <= 1) return 0.0;
  const stage_cost& c = stage(s);
  if (c.reduce >= 0.0) return c.reduce;
  const double w = replicas;
  return 2.0 * (w - 1.0) / w * reduce_link.transfer(c.param_bytes) +
         2.0 * (w - 1.0) * reduce_link.latency;
}

status cost_model::check(int virtual_stages, int devices_per_replica, int replicas,
                         int model_stages) const {
  if (stages.empty()) {
    return make_error("cost model: no stage costs; give one entry for all stages or one per stage");
  }
  const int n = static_cast<int>(stages.size());
  const bool per_model_stage = model_stages > 0 && model_stages != virtual_stages && n == model_stages;
  if (n != 1 && n != virtual_stages && !per_model_stage) {
    return make_error("cost model: " + std::to_string(stages.size()) +
                      " stage entries for a schedule with " + std::to_string(virtual_stages) +
                      " virtual stages; give 1 (for all) or " + std::to_string(virtual_stages) +
                      (model_stages > 0 && model_stages != virtual_stages
                           ? " (or " + std::to_string(model_stages) + ", one per stage of the model)"
                           : std::string()));
  }
  if (devices.empty()) {
    return make_error("cost model: no device entries; give one for all devices or one per device");
  }
  if (devices.size() != 1 && static_cast<int>(devices.size()) != devices_per_replica) {
    return make_error("cost model: " + std::to_string(devices.size()) + " device entries for " +
                      std::to_string(devices_per_replica) +
                      " devices per replica; give 1 (for all) or " +
                      std::to_string(devices_per_replica));
  }
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (!(devices[d].speed > 0.0) || !std::isfinite(devices[d].speed)) {
      return make_error("cost model: device " + std::to_string(d) + " speed " +
                        num(devices[d].speed) + " must be finite and > 0 (1 is nominal)");
    }
    if (devices[d].memory < 0 || devices[d].memory > max_cost_bytes) {
      return make_error("cost model: device " + std::to_string(d) + " memory " +
                        std::to_string(devices[d].memory) + " must be in 0..2^62 (0 = unlimited)");
    }
  }
  if (status st = check_link(link, "link"); !st) return st;
  if (status st = check_link(reduce_link, "reduce_link"); !st) return st;
  for (const auto& l : links) {
    const std::string where = "link " + std::to_string(l.from) + "-" + std::to_string(l.to);
    if (l.from < 0 || l.to < 0 || l.from >= devices_per_replica || l.to >= devices_per_replica) {
      return make_error("cost model: " + where + " names a device outside 0.." +
                        std::to_string(devices_per_replica - 1));
    }
    if (status st = check_link(l.cost, where); !st) return st;
  }
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const stage_cost& c = stages[s];
    const std::string where = "stage " + std::to_string(s);
    if (status st = check_stage(c, where); !st) return st;
    if (status st = check_transfer(link, "link", c, where); !st) return st;
    for (const auto& l : links) {
      const std::string name = "link " + std::to_string(l.from) + "-" + std::to_string(l.to);
      if (status st = check_transfer(l.cost, name, c, where); !st) return st;
    }
    // The derived REDUCE time: a ring all-reduce of param_bytes over reduce_link.
    const double reduce = stages.size() == 1 ? reduce_time(0, replicas) : reduce_time(s, replicas);
    if (!std::isfinite(reduce)) {
      return make_error("cost model: " + where + " REDUCE time over " + std::to_string(replicas) +
                        " replicas overflows to " + num(reduce) + " (param_bytes " +
                        std::to_string(c.param_bytes) + ", reduce_link bandwidth " +
                        num(reduce_link.bandwidth) + ", latency " + num(reduce_link.latency) +
                        "); raise the bandwidth, lower the bytes or give the stage a reduce time");
    }
  }
  return {};
}

cost_model uniform_costs(double forward, double backward, double weight_grad) {
  cost_model c;
  c.stages[0].forward = forward;
  c.stages[0].backward = backward;
  c.stages[0].weight_grad = weight_grad;
  return c;
}

result<cost_model> parse_cost_model(std::string_view json_text) {
  auto parsed = parse_json(json_text, "costs.json");
  if (!parsed) return parsed.err();
  const json& j = *parsed;
  PW_TRY(only_keys(j, json_where{prefix, "the top level"},
                   {"stages", "link", "links", "reduce_link", "devices"}));
  cost_model c;
  if (j.contains("stages")) {
    const json& st = j.at("stages");
    if (!st.is_array() || st.empty()) {
      return make_error(prefix + "\"stages\" must be a non-empty array of stage objects");
    }
    c.stages.clear();
    for (std::size_t i = 0; i < st.size(); ++i) {
      const json_where at{prefix, "stages[" + std::to_string(i) + "]"};
      const json& s = st[i];
      PW_TRY(only_keys(s, at, {"forward", "backward", "weight_grad", "step", "reduce",
                               "activation_bytes", "boundary_bytes", "param_bytes"}));
      stage_cost sc;
      PW_TRY(read_number(s, at, "forward", any_number, sc.forward));
      PW_TRY(read_number(s, at, "backward", any_number, sc.backward));
      PW_TRY(read_number(s, at, "weight_grad", any_number, sc.weight_grad));
      PW_TRY(read_number(s, at, "step", any_number, sc.step));
      PW_TRY(read_number(s, at, "reduce", any_number, sc.reduce));
      PW_TRY(read_whole(s, at, "activation_bytes", byte_count, sc.activation_bytes));
      PW_TRY(read_whole(s, at, "boundary_bytes", byte_count, sc.boundary_bytes));
      PW_TRY(read_whole(s, at, "param_bytes", byte_count, sc.param_bytes));
      c.stages.push_back(sc);
    }
  }
  if (j.contains("link")) {
    auto l = read_link(j.at("link"), json_where{prefix, "link"}, false);
    if (!l) return l.err();
    c.link = *l;
  }
  if (j.contains("reduce_link")) {
    auto l = read_link(j.at("reduce_link"), json_where{prefix, "reduce_link"}, false);
    if (!l) return l.err();
    c.reduce_link = *l;
  }
  if (j.contains("links")) {
    const json& ls = j.at("links");
    if (!ls.is_array()) {
      return make_error(prefix + "\"links\" must be an array of {from, to, latency, bandwidth}");
    }
    for (std::size_t i = 0; i < ls.size(); ++i) {
      const json_where at{prefix, "links[" + std::to_string(i) + "]"};
      if (!ls[i].is_object() || !ls[i].contains("from") || !ls[i].contains("to")) {
        return make_error(prefix + at.path + " needs \"from\" and \"to\" device numbers");
      }
      auto l = read_link(ls[i], at, true, c.link);
      if (!l) return l.err();
      device_link dl;
      dl.cost = *l;
      PW_TRY(read_whole(ls[i], at, "from", device_number, dl.from));
      PW_TRY(read_whole(ls[i], at, "to", device_number, dl.to));
      c.links.push_back(dl);
    }
  }
  if (j.contains("devices")) {
    const json& ds = j.at("devices");
    if (!ds.is_array() || ds.empty()) {
      return make_error(prefix + "\"devices\" must be a non-empty array of {speed, memory}");
    }
    c.devices.clear();
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const json_where at{prefix, "devices[" + std::to_string(i) + "]"};
      PW_TRY(only_keys(ds[i], at, {"speed", "memory"}));
      device_cost dc;
      PW_TRY(read_number(ds[i], at, "speed", any_number, dc.speed));
      PW_TRY(read_whole(ds[i], at, "memory", byte_count, dc.memory));
      c.devices.push_back(dc);
    }
  }
  return c;
}

result<cost_model> load_cost_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return make_error("cost file '" + path +
                      "' is a directory; give the path of a costs.json file");
  }
  auto text = read_input_text(path, json_input_limit, "cost file");
  if (!text) return make_error(text.message() + "; give the path of a costs.json");
  auto c = parse_cost_model(*text);
  if (c) return c;
  const std::string& m = c.message();
  return make_error(path + ": " + (m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m));
}

}  // namespace pipeworks
