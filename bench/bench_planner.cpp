// PipeDream's planner's speed: the time to plan up to 1,000 layers on 1,024 devices, level by level
// on servers of 8 and on one flat pool, with unlimited memory and 80 GB devices (in_flight = p − s
// or fixed), with every stage on the same replica count, with parameters / 100 or none (long
// replicated stages: the level-by-level program's slow case), and on NVL72-shaped servers of 72.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "partition/pipedream_planner.hpp"

using namespace pipeworks;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Transformer-block-like layers, ±50% around 1 ms forward, 2 ms backward, 16 MB out, 64 MB saved,
// 50 MB of parameters and 100 MB of optimizer state.
// param_scale < 1: lighter parameters, so replicating long ranges pays and stages grow long.
model_profile make_profile(int layers, unsigned seed, double param_scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  model_profile p;
  p.model = "synthetic";
  for (int l = 0; l < layers; ++l) {
    layer_profile x;
    x.name = "block" + std::to_string(l);
    x.fwd_ms = 1.0 * jitter(rng);
    x.bwd_ms = 2.0 * jitter(rng);
    x.activation_bytes = static_cast<std::int64_t>(16e6 * jitter(rng));
    x.saved_bytes = static_cast<std::int64_t>(64e6 * jitter(rng));
    x.param_bytes = static_cast<std::int64_t>(50e6 * param_scale * jitter(rng));
    x.optimizer_bytes = 2 * x.param_bytes;
    p.layers.push_back(x);
  }
  return p;
}

// servers of `per_server` devices: NVLink 450 GB/s inside a server, 400 Gb/s between servers; or
// one flat level of all the devices at 400 Gb/s.
cluster make_cluster(int devices, std::int64_t memory, bool flat, int per_server) {
  cluster c;
  c.device_memory_bytes = memory;
  if (flat) {
    c.levels.push_back(cluster_level{"pool", devices, 50e9, 0.0});
    return c;
  }
  c.levels.push_back(cluster_level{"server", std::min(devices, per_server), 450e9, 0.0});
  if (devices > per_server) c.levels.push_back(cluster_level{"cluster", devices / per_server, 50e9, 0.0});
  return c;
}

struct row {
  int layers;
  int devices;
  std::int64_t memory;  // 0: unlimited
  int in_flight;        // 0: p − s
  bool flat = false;    // one level of all devices, else servers of 8
  bool same_replicas = false;
  double param_scale = 1.0;  // 0: no parameters
  int per_server = 8;
};

std::string cluster_text(const row& r) {
  if (r.flat) return std::string(r.same_replicas ? "flat, same replicas" : "flat") + (r.param_scale == 0 ? ", no params" : "");
  std::string s = "servers of " + std::to_string(r.per_server);
  if (r.same_replicas) s += ", same replicas";
  if (r.param_scale == 0) s += ", no params";
  else if (r.param_scale < 1) s += ", params / 100";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PipeDream planner benchmark: planning time against layers and devices"};
  int reps = 3;
  bool quick = false;
  app.add_option("--reps", reps, "repetitions per measurement (best is reported)")->capture_default_str();
  app.add_flag("--quick", quick, "skip the 1,000-layer, 1,024-device rows");
  CLI11_PARSE(app, argc, argv);

  const std::int64_t gb80 = 80'000'000'000;
  std::vector<row> rows = {
      {100, 64, 0, 0},           {100, 64, gb80, 0},         {200, 128, gb80, 0},
      {100, 64, gb80, 0, true},  {200, 128, gb80, 0, true},  {100, 64, gb80, 0, false, true},
      {1000, 1024, 0, 0},        {1000, 1024, gb80, 16},     {1000, 1024, gb80, 0},
      {1000, 1024, 0, 0, true},  {1000, 1024, gb80, 0, true}, {1000, 1024, gb80, 0, false, true},
      {1000, 1024, gb80, 0, false, false, 0.01},
      {1000, 1008, 0, 0, false, false, 1.0, 72},  {1000, 1008, gb80, 0, false, false, 1.0, 72},
      {1000, 1024, 0, 0, false, false, 0.0},      {1000, 1024, 0, 0, true, true, 0.0},
      {1000, 1024, 0, 0, false, true, 0.0},
  };
  if (quick) rows.resize(6);
  std::printf("## PipeDream planner time (best of %d)\n\n", reps);
  std::printf("| layers | devices | cluster | memory | in_flight | plan (s) | stages | devices used | "
              "bottleneck (ms) | max replicas |\n");
  std::printf("|---:|---:|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const row& r : rows) {
    const model_profile p = make_profile(r.layers, 7, r.param_scale);
    const cluster c = make_cluster(r.devices, r.memory, r.flat, r.per_server);
    pipedream_options opt;
    opt.in_flight = r.in_flight;
    opt.same_replicas = r.same_replicas;
    double best = 1e30;
    pipeline_plan plan;
    for (int i = 0; i < reps; ++i) {
      const double t0 = now();
      auto planned = plan_pipedream(p, c, opt);
      best = std::min(best, now() - t0);
      if (!planned) {
        std::printf("planning failed: %s\n", planned.message().c_str());
        return 1;
      }
      plan = std::move(planned).value();
    }
    int replicas = 0;
    for (const auto& s : plan.stages) replicas = std::max(replicas, s.replicas);
    std::printf("| %d | %d | %s | %s | %s | %.3f | %zu | %zu | %.3f | %d |\n", r.layers, r.devices,
                cluster_text(r).c_str(), r.memory ? "80 GB" : "unlimited",
                r.in_flight ? std::to_string(r.in_flight).c_str() : "p − s", best,
                plan.stages.size(), plan.memory_bytes.size(), plan.bottleneck_ms, replicas);
    std::fflush(stdout);
  }
  return 0;
}
