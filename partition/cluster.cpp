// cluster.json and the presets: parses both forms (a hierarchy of levels, or a list of
// heterogeneous devices), answers device count, speed, memory and the level between two devices.
#include "partition/cluster.hpp"
#include "base/input_file.hpp"

#include <unistd.h>

#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ops/device/device.hpp"
#include "base/cpu_count.hpp"
#include "base/json_read.hpp"

namespace pipeworks {

namespace {

using json = nlohmann::json;

const std::string prefix = "cluster.json: ";
const std::string preset_list = "dgx-h100x{N}, v100x{N} (N >= 1 servers of 8 GPUs), local-cpu";

const whole_range byte_count{.min = 0, .max = std::int64_t{1} << 62, .unit = "bytes",
                             .note = "0: unlimited"};

result<cluster_level> read_level(const json& j, const std::string& where, bool count_required) {
  const json_where at{prefix, where};
  PW_TRY(only_keys(j, at, {"name", "count", "bandwidth_bytes_per_s", "latency_s"}));
  cluster_level l;
  l.count = 0;
  PW_TRY(read_string(j, at, "name", l.name));
  if (count_required) {
    PW_TRY(need_key(j, at, "count", "the number of units of the level below (devices, for the "
                                    "first level) in one of these"));
  }
  PW_TRY(read_whole(j, at, "count", {.min = 1, .max = INT_MAX}, l.count));
  PW_TRY(need_key(j, at, "bandwidth_bytes_per_s",
                  "the bandwidth between its units in bytes per second (> 0)"));
  PW_TRY(read_number(j, at, "bandwidth_bytes_per_s",
                     {.bound = number_range::positive,
                      .note = "bytes per second",
                      .min = min_bandwidth_bytes_per_s},
                     l.bandwidth_bytes_per_s));
  PW_TRY(read_number(j, at, "latency_s",
                     {.bound = number_range::non_negative,
                      .note = "seconds",
                      .min = 0,
                      .max = max_latency_s},
                     l.latency_s));
  return l;
}

std::string device_range(int device, int count) {
  return "device " + std::to_string(device) + " is outside this cluster's devices 0.." +
         std::to_string(count - 1);
}

// N in "<prefix>N": -1 if `name` is not of that form, 0 if N is 0 or too large for a cluster.
long long preset_servers(const std::string& name, const std::string& pfx) {
  if (name.rfind(pfx, 0) != 0 || name.size() == pfx.size()) return -1;
  long long n = 0;
  const char* first = name.data() + pfx.size();
  const char* last = name.data() + name.size();
  auto [end, ec] = std::from_chars(first, last, n);
  if (end != last) return -1;
  if (ec != std::errc() || n > INT_MAX / 8) return 0;
  return n;
}

cluster gpu_servers(int servers, double nvlink, double nvlink_latency, double network,
                    double network_latency, std::int64_t memory) {
  cluster c;
  c.device_memory_bytes = memory;
  c.levels = {{"server", 8, nvlink, nvlink_latency}, {"cluster", servers, network, network_latency}};
  return c;
}

cluster local_cpu() {
  const int cores = usable_cores();
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  cluster c;
  c.device_memory_bytes =
      pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page / cores : 0;
  c.levels = {{"machine", cores, 10e9, 1e-6}};
  return c;
}

}  // namespace

std::string device_label(const cluster& c, int d) {
  if (d >= 0 && d < static_cast<int>(c.devices.size()) &&
      !c.devices[static_cast<std::size_t>(d)].name.empty())
    return c.devices[static_cast<std::size_t>(d)].name;
  return "device " + std::to_string(d);
}

int cluster::device_count() const {
  if (!devices.empty()) return static_cast<int>(devices.size());
  std::int64_t n = 1;
  for (const cluster_level& l : levels) n *= l.count;  // parse_cluster keeps this within an int
  return static_cast<int>(n);
}

double cluster::speed(int device) const {
  const int n = device_count();
  if (device < 0 || device >= n) throw pipeworks_error("cluster::speed: " + device_range(device, n));
  return devices.empty() ? 1.0 : devices[device].speed;
}

std::int64_t cluster::memory(int device) const {
  const int n = device_count();
  if (device < 0 || device >= n) {
    throw pipeworks_error("cluster::memory: " + device_range(device, n));
  }
  return devices.empty() ? device_memory_bytes : devices[device].memory_bytes;
}

// Devices are numbered so that a unit of level i holds the devices d with the same
// d / (count_0 * ... * count_i). For d != e the answer is the smallest i with
//   d / (count_0 * ... * count_i) == e / (count_0 * ... * count_i),
// the innermost level whose unit holds both: their traffic crosses level i's links, so
// levels[i]'s bandwidth and latency apply (0: the same server, NVLink; 1: different servers
// of one cluster, the network). For d == e: -1 (no transfer: infinite bandwidth, no latency).
// In the heterogeneous form every pair of distinct devices is at level 0, the one flat level
// (levels[0] when given; without it the caller has no link figures and should treat the
// transfer as free).
int cluster::level_between(int d, int e) const {
  const int n = device_count();
  if (d < 0 || d >= n) throw pipeworks_error("cluster::level_between: " + device_range(d, n));
  if (e < 0 || e >= n) throw pipeworks_error("cluster::level_between: " + device_range(e, n));
  if (d == e) return -1;
  if (!devices.empty()) return 0;
  std::int64_t unit = 1;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    unit *= levels[i].count;
    if (d / unit == e / unit) return static_cast<int>(i);
  }
  return static_cast<int>(levels.size()) - 1;  // unreachable: the outermost unit holds all
}

result<cluster> parse_cluster(const std::string& json_text) {
  auto parsed = parse_json(json_text, "cluster.json");
  if (!parsed) return parsed.err();
  const json& j = *parsed;
  const json_where top{prefix, "the top level"};
  PW_TRY(only_keys(j, top, {"device_memory_bytes", "levels", "devices"}));
  cluster c;
  std::vector<json> levels;
  if (j.contains("levels")) {
    const json& ls = j.at("levels");
    if (!ls.is_array() || ls.empty()) {
      return make_error(prefix + "\"levels\" must be a non-empty array of {name, count, "
                        "bandwidth_bytes_per_s, latency_s}, innermost first, not " + ls.dump());
    }
    levels.assign(ls.begin(), ls.end());
  }
  if (j.contains("devices")) {
    // The heterogeneous form: one entry per device, at most one level for the links.
    if (j.contains("device_memory_bytes")) {
      return make_error(prefix + "\"device_memory_bytes\" goes with \"levels\" alone; with "
                        "\"devices\" give each device its \"memory_bytes\"");
    }
    if (levels.size() > 1) {
      return make_error(prefix + "with \"devices\", \"levels\" may hold one level (the links "
                        "between the devices), not " + std::to_string(levels.size()) +
                        "; give either a hierarchy of levels or a list of devices");
    }
    const json& ds = j.at("devices");
    if (!ds.is_array() || ds.empty()) {
      return make_error(prefix + "\"devices\" must be a non-empty array of {name, speed, "
                        "memory_bytes}, not " + ds.dump());
    }
    if (ds.size() > static_cast<std::size_t>(INT_MAX)) {
      return make_error(prefix + "too many devices (max 2^31-1)");
    }
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const json_where at{prefix, "devices[" + std::to_string(i) + "]"};
      PW_TRY(only_keys(ds[i], at, {"name", "speed", "memory_bytes", "profile", "device"}));
      device_spec d;
      PW_TRY(read_string(ds[i], at, "name", d.name));
      PW_TRY(read_number(ds[i], at, "speed",
                         {.bound = number_range::positive,
                          .note = "1 is nominal; times are divided by it",
                          .min = min_device_speed,
                          .max = max_device_speed},
                         d.speed));
      PW_TRY(read_whole(ds[i], at, "memory_bytes", byte_count, d.memory_bytes));
      if (ds[i].contains("profile")) {
        PW_TRY(read_string(ds[i], at, "profile", d.profile));
        if (d.profile.empty())
          return make_error(prefix + at.path + ".profile: give the path of a profile.json measured "
                            "on that device, or leave the key out");
      }
      if (ds[i].contains("device")) {
        std::string name;
        PW_TRY(read_string(ds[i], at, "device", name));
        auto named = parse_named_device(name);
        if (!named) return make_error(prefix + at.path + ".device: " + named.message());
        d.device = *named;
      }
      c.devices.push_back(std::move(d));
    }
    if (!levels.empty()) {
      auto l = read_level(levels[0], "levels[0]", false);
      if (!l) return l.err();
      const int n = static_cast<int>(c.devices.size());
      if (l->count == 0) l->count = n;
      if (l->count != n) {
        return make_error(prefix + "levels[0].count " + std::to_string(l->count) + " must equal "
                          "the number of devices, " + std::to_string(n) + " (or leave it out)");
      }
      c.levels.push_back(std::move(*l));
    }
    return c;
  }
  if (levels.empty()) {
    return make_error(prefix + "give \"levels\" (a hierarchy, innermost first: e.g. 8 GPUs "
                      "per server, 16 servers) or \"devices\" (one entry per device)");
  }
  PW_TRY(read_whole(j, top, "device_memory_bytes", byte_count, c.device_memory_bytes));
  std::int64_t devices = 1;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const std::string where = "levels[" + std::to_string(i) + "]";
    auto l = read_level(levels[i], where, true);
    if (!l) return l.err();
    devices *= l->count;
    if (devices > INT_MAX) {
      return make_error(prefix + where + ".count " + std::to_string(l->count) +
                        " makes more than 2^31-1 devices in all");
    }
    c.levels.push_back(std::move(*l));
  }
  return c;
}

result<cluster> load_cluster(const std::string& name_or_path) {
  const std::string& name = name_or_path;
  if (name == "local-cpu") return local_cpu();
  for (const char* pfx : {"dgx-h100x", "v100x"}) {
    const long long n = preset_servers(name, pfx);
    if (n == 0) {
      return make_error("cluster preset '" + name + "' needs 1.." + std::to_string(INT_MAX / 8) +
                        " servers after '" + pfx + "', e.g. " + pfx + "4");
    }
    if (n < 0) continue;
    if (std::string(pfx) == "dgx-h100x") {
      // 8 H100 80 GB per server, NVLink 450 GB/s; 400 Gb/s InfiniBand between servers.
      return gpu_servers(static_cast<int>(n), 450e9, 2e-6, 50e9, 5e-6, std::int64_t{80} << 30);
    }
    // PipeDream-2BW's setting: 8 V100 16 GB per server, NVLink 150 GB/s; 100 Gb/s between.
    return gpu_servers(static_cast<int>(n), 150e9, 5e-6, 12.5e9, 5e-6, std::int64_t{16} << 30);
  }
  std::error_code ec;
  const bool exists = std::filesystem::exists(name, ec);
  if (!exists && name.find('/') == std::string::npos && name.find('.') == std::string::npos) {
    return make_error("no cluster preset or file '" + name + "'; presets: " + preset_list +
                      "; or give the path of a cluster.json");
  }
  if (std::filesystem::is_directory(name, ec)) {
    return make_error("cluster file '" + name + "' is a directory; give the path of a "
                      "cluster.json file or a preset (" + preset_list + ")");
  }
  auto text = read_input_text(name, json_input_limit, "cluster file");
  if (!text)
    return make_error(text.message() + "; give the path of a cluster.json or a preset (" +
                      preset_list + ")");
  auto c = parse_cluster(*text);
  if (c) return c;
  const std::string& m = c.message();
  return make_error(name + ": " + (m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m));
}

std::string to_json(const cluster& c) {
  using ordered_json = nlohmann::ordered_json;  // keys in the documented order
  ordered_json j = ordered_json::object();
  if (c.devices.empty()) {
    j["device_memory_bytes"] = c.device_memory_bytes;
  } else {
    ordered_json ds = ordered_json::array();
    for (const device_spec& d : c.devices) {
      ds.push_back({{"name", d.name}, {"speed", d.speed}, {"memory_bytes", d.memory_bytes}});
      if (!d.profile.empty()) ds.back()["profile"] = d.profile;
      if (d.device.on_gpu()) ds.back()["device"] = d.device.to_string();
    }
    j["devices"] = std::move(ds);
  }
  if (!c.levels.empty()) {
    ordered_json levels = ordered_json::array();
    for (const cluster_level& l : c.levels) {
      levels.push_back({{"name", l.name},
                        {"count", l.count},
                        {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                        {"latency_s", l.latency_s}});
    }
    j["levels"] = std::move(levels);
  }
  return j.dump(2) + "\n";
}

}  // namespace pipeworks
