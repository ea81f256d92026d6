// The simulator's cost model: per virtual stage compute times and sizes, per link latency and
// bandwidth, per device speed and memory; read from costs.json or built in code.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace pipeworks {

// The largest byte count (activations, boundary, parameters, memory) a cost model may give.
constexpr std::int64_t max_cost_bytes = std::int64_t{1} << 62;

// Times are in seconds (or any unit, used consistently); sizes in bytes.
struct stage_cost {
  double forward = 1.0;          // F
  double backward = 2.0;         // B: the full backward; a split backward runs I = B - W, then W
  double weight_grad = 1.0;      // W: the weight-gradient half of B
  double step = 0.0;             // STEP: optimizer update
  double reduce = -1.0;          // REDUCE time; < 0: ring all-reduce of param_bytes (reduce_link)
  std::int64_t activation_bytes = 0;  // stashed per microbatch from its F until its last backward
  std::int64_t boundary_bytes = 0;    // activation sent to the next stage (and its gradient back)
  std::int64_t param_bytes = 0;       // one weight version

  double input_grad() const { return backward - weight_grad; }  // I
};

struct link_cost {
  double latency = 0.0;                                        // seconds per message
  double bandwidth = std::numeric_limits<double>::infinity();  // bytes per second

  // Time a message of `bytes` takes on the wire, latency excluded (0 with infinite bandwidth).
  double transfer(std::int64_t bytes) const {
    return bytes <= 0 || bandwidth == std::numeric_limits<double>::infinity()
               ? 0.0 : static_cast<double>(bytes) / bandwidth;
  }
};

// A link between two devices of a pipeline; device pairs not listed use cost_model::link.
struct device_link {
  int from = 0;
  int to = 0;
  link_cost cost;
};

struct device_cost {
  double speed = 1.0;        // compute times are divided by this
  std::int64_t memory = 0;   // bytes; 0 means unlimited
};

struct cost_model {
  // One entry per virtual stage, or a single entry that every stage uses.
  std::vector<stage_cost> stages{stage_cost{}};
  link_cost link;                    // default for pipeline links (sends and receives)
  std::vector<device_link> links;    // overrides, either direction
  link_cost reduce_link;             // between the replicas of a stage, for derived REDUCE times
  // One entry per device (0..p-1; every replica of a device shares it), or a single entry for all.
  std::vector<device_cost> devices{device_cost{}};

  const stage_cost& stage(int s) const { return stages.size() == 1 ? stages[0] : stages[s]; }
  const device_cost& device(int d) const { return devices.size() == 1 ? devices[0] : devices[d]; }
  const link_cost& link_between(int a, int b) const;
  // REDUCE time of virtual stage s with `replicas` replicas: the given time, or a ring
  // all-reduce, 2(w-1)/w * param_bytes / bandwidth + 2(w-1) * latency. 0 with one replica.
  double reduce_time(int s, int replicas) const;

  // Checks sizes against the schedule's shape and that every number is usable: times finite and
  // >= 0, byte counts in 0..2^62, and the derived transfer and REDUCE times (with `replicas`
  // replicas) finite. Stage entries: 1, one per virtual stage, or one per stage of the model
  // (`model_stages`, dualpipe's p: each route's copy of a stage costs the same; 0: none).
  status check(int virtual_stages, int devices_per_replica, int replicas = 1,
               int model_stages = 0) const;
};

// Every stage F, B, W (so I = B - W), free communication, unlimited memory.
cost_model uniform_costs(double forward, double backward, double weight_grad = 0.0);

// costs.json:
//   {"stages": [{"forward": 1, "backward": 2, "weight_grad": 1, "step": 0, "reduce": -1,
//                "activation_bytes": 0, "boundary_bytes": 0, "param_bytes": 0}, ...],
//    "link": {"latency": 0, "bandwidth": 1e10},
//    "links": [{"from": 0, "to": 1, "latency": 1e-5, "bandwidth": 1e9}],
//    "reduce_link": {"latency": 0, "bandwidth": 1e10},
//    "devices": [{"speed": 1, "memory": 8e10}, ...]}
// Every key is optional; a missing bandwidth is infinite. Unknown keys are errors. Byte counts
// and memory are whole numbers up to 2^62, link ends whole device numbers. A path that is a
// directory, or a file that is not JSON, is an error that says so.
result<cost_model> parse_cost_model(std::string_view json_text);
result<cost_model> load_cost_model(const std::string& path);

}  // namespace pipeworks
