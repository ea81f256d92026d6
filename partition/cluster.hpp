// The devices a plan may use: a hierarchy of levels (innermost first: e.g. 8 GPUs per server,
// 16 servers) with a bandwidth and latency each, or a list of heterogeneous devices (speed,
// memory). Read from cluster.json or a preset (dgx-h100x{N}, local-cpu).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "ops/device/device.hpp"

namespace pipeworks {

// Bounds beyond which a figure is a mistake of units and would overflow a plan's times: a device
// speed in 1e-6..1e6 (relative to nominal), a bandwidth of at least 1 byte per second, a latency
// of at most 1e6 seconds.
constexpr double min_device_speed = 1e-6, max_device_speed = 1e6;
constexpr double min_bandwidth_bytes_per_s = 1;
constexpr double max_latency_s = 1e6;

struct cluster_level {
  std::string name;                 // "server", "cluster"
  int count = 1;                    // units of the level below in one of these (devices for the first)
  double bandwidth_bytes_per_s = 0; // between the units of this level
  double latency_s = 0;
};

struct device_spec {
  std::string name;
  double speed = 1.0;               // profile times are divided by this
  std::int64_t memory_bytes = 0;    // 0: unlimited
  std::string profile;              // a profile measured on this kind of device; "": the plan's
  // Where `train --auto-partition` runs the ranks planned on it: "cpu" (a throttled core),
  // "cuda" or "cuda:N" (that GPU, at its own pace: speed 1 and a profile measured there); parsed
  // when the cluster is read.
  named_device device;
};

struct cluster {
  std::int64_t device_memory_bytes = 0;  // every device's, with levels; 0: unlimited
  std::vector<cluster_level> levels;     // innermost first; empty with `devices`
  // Heterogeneous form: one entry per device (one flat level of `devices.size()` then applies,
  // with the bandwidth and latency of levels[0] if given).
  std::vector<device_spec> devices;

  int device_count() const;                  // the product of the level counts, or devices.size()
  double speed(int device) const;            // 1.0 for a homogeneous cluster
  std::int64_t memory(int device) const;     // device_memory_bytes or devices[d].memory_bytes
  // The innermost level whose unit holds both devices (0 when they share a server), and its
  // bandwidth and latency; for d == e, infinite bandwidth and no latency.
  int level_between(int d, int e) const;
};

// How people see device d: its name in the devices list, or "device <d>" (no name, or levels).
std::string device_label(const cluster& c, int d);

// {"device_memory_bytes": .., "levels": [{"name": .., "count": .., "bandwidth_bytes_per_s": ..,
//  "latency_s": ..}, ...]} or {"devices": [{"name": .., "speed": .., "memory_bytes": ..,
//  "profile": .. (optional: a profile.json measured on that kind of device), "device": ..
//  (optional: cpu, cuda or cuda:N, where train --auto-partition runs it; cpu by default)}, ...],
//  "levels": [...optional, one level...]}. Errors name the field.
result<cluster> parse_cluster(const std::string& json_text);
// A preset name ("dgx-h100x4": 4 servers of 8 H100 80 GB, NVLink 450 GB/s inside a server,
// 400 Gb/s between servers; "local-cpu": the cores this process may use (usable_cores()), one
// level, memory = RAM shared among them) or a
// path to a cluster.json file.
result<cluster> load_cluster(const std::string& name_or_path);
std::string to_json(const cluster& c);

}  // namespace pipeworks
