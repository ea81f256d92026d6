// Tests for the start-up plan (partition/auto_partition.hpp): ranks mapped to the plan's devices,
// speeds and run devices (a GPU by its own profile), microbatches the replicas share, the refusals
// (speed > 1, too many cores, a 2BW batch, too few microbatches for 2bw), the defaults and the text.
#include "partition/auto_partition.hpp"

#include <catch2/catch.hpp>
#include <cstdio>

using namespace pipeworks;

namespace {

// `layers` identical layers: 1 ms forward, 2 ms backward, no parameters, at microbatch 4.
model_profile uniform_profile(int layers) {
  model_profile p;
  p.model = "uniform";
  p.microbatch = 4;
  for (int l = 0; l < layers; ++l)
    p.layers.push_back(layer_profile{"l" + std::to_string(l), 1.0, 2.0, 1000, 1000, 0, 0});
  return p;
}

cluster hetero() {
  auto c = parse_cluster(R"({"devices": [{"name": "fast0", "speed": 0.5}, {"name": "fast1", "speed": 0.5},
                                          {"name": "slow0", "speed": 0.25}, {"name": "slow1", "speed": 0.25}]})");
  REQUIRE(c.ok());
  return *c;
}

// A request for `planner` (its own schedule), a step of `batch` in `microbatches`, `cores` cores,
// and the GPU profile `gpu` under the name the cluster gives it.
auto_partition_request mixed_request(planner_kind planner, std::int64_t batch, int microbatches,
                                     int cores, const char* name, const model_profile& gpu) {
  auto_partition_request rq;
  rq.planner = planner;
  rq.schedule = planner == planner_kind::two_bw ? schedule_kind::two_bw : schedule_kind::one_f_one_b;
  rq.batch = batch;
  rq.microbatches = microbatches;
  rq.cores = cores;
  rq.device_profiles.emplace(name, gpu);
  return rq;
}

}  // namespace

TEST_CASE("auto partition maps every rank to its planned device and that device's speed", "[actors]") {
  const cluster c = hetero();
  for (int layers : {1, 4, 6}) {
    CAPTURE(layers);
    auto_partition_request rq;
    rq.batch = 32;
    rq.microbatches = 8;
    auto a = plan_auto_partition(uniform_profile(layers), c, rq);
    REQUIRE(a.ok());
    REQUIRE(a->p == static_cast<int>(a->stages.size()));
    CHECK(a->m * a->w == 8);
    CHECK(a->microbatch == 4);
    CHECK(a->batch == 32);
    REQUIRE(a->boundaries.size() == static_cast<std::size_t>(a->p + 1));
    CHECK(a->boundaries.front() == 0);
    CHECK(a->boundaries.back() == layers);
    REQUIRE(a->rank_device.size() == static_cast<std::size_t>(a->p * a->w));
    for (int s = 0; s < a->p; ++s) {
      CHECK(a->boundaries[static_cast<std::size_t>(s)] == a->stages[static_cast<std::size_t>(s)].first_layer);
      for (int j = 0; j < a->w; ++j) {
        const auto r = static_cast<std::size_t>(j * a->p + s);
        const int d = a->stages[static_cast<std::size_t>(s)].devices.at(static_cast<std::size_t>(j));
        CHECK(a->rank_device[r] == d);
        CHECK(a->device_speed[r] == c.speed(d));
        CHECK(a->device_names[r] == c.devices[static_cast<std::size_t>(d)].name);
      }
    }
    CHECK(a->simulated_step_ms > 0);
  }
}

TEST_CASE("auto partition refuses a device faster than one core", "[actors]") {
  auto c = parse_cluster(R"({"devices": [{"name": "gpu0", "speed": 2}, {"name": "cpu0", "speed": 1}]})");
  REQUIRE(c.ok());
  auto a = plan_auto_partition(uniform_profile(2), *c, {});
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.message(), Catch::Contains("gpu0") && Catch::Contains("at most 1"));
}

TEST_CASE("auto partition refuses devices whose speeds add up to more than the cores", "[actors]") {
  auto c = parse_cluster(R"({"devices": [{"speed": 1}, {"speed": 1}, {"speed": 1}, {"speed": 1}]})");
  REQUIRE(c.ok());
  auto_partition_request rq;
  rq.batch = 16;
  rq.microbatches = 4;
  rq.cores = 2;
  // One layer can only be replicated: with free all-reduce the plan takes all four devices.
  auto a = plan_auto_partition(uniform_profile(1), *c, rq);
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.message(), Catch::Contains("add up to 4") && Catch::Contains("has 2"));
  rq.cores = 4;
  CHECK(plan_auto_partition(uniform_profile(1), *c, rq).ok());
}

TEST_CASE("auto partition plans on fewer devices until its replicas share the microbatches", "[actors]") {
  // One layer on four identical devices: only replication helps, so the best plan takes all four,
  // which cannot share 3 microbatches; the plan on three devices can.
  auto c = parse_cluster(R"({"devices": [{"speed": 1}, {"speed": 1}, {"speed": 1}, {"speed": 1}]})");
  REQUIRE(c.ok());
  auto_partition_request rq;
  rq.batch = 12;
  rq.microbatches = 3;
  auto a = plan_auto_partition(uniform_profile(1), *c, rq);
  REQUIRE(a.ok());
  CHECK(a->w == 3);
  CHECK(a->m == 1);
  CHECK(a->microbatch == 4);
  rq.batch = 16;
  rq.microbatches = 4;
  a = plan_auto_partition(uniform_profile(1), *c, rq);
  REQUIRE(a.ok());
  CHECK(a->w == 4);
  CHECK(a->m == 1);
}

TEST_CASE("auto partition on three devices with batch 16 shares the default microbatches", "[actors]") {
  // The CLI's default for batch 16 on 3 devices: 4 microbatches (6 does not divide 16).
  const int m = default_microbatches(16, 3);
  CHECK(m == 4);
  auto c = parse_cluster(R"({"devices": [{"name": "a", "speed": 0.3}, {"name": "b", "speed": 0.3},
                                          {"name": "c", "speed": 0.3}]})");
  REQUIRE(c.ok());
  for (int layers : {1, 2, 3, 6}) {
    CAPTURE(layers);
    auto_partition_request rq;
    rq.batch = 16;
    rq.microbatches = m;
    auto a = plan_auto_partition(uniform_profile(layers), *c, rq);
    REQUIRE(a.ok());
    CHECK(m % a->w == 0);
    CHECK(a->m * a->w == m);
    CHECK(a->microbatch == 4);
    CHECK(a->batch == 16);
  }
}

TEST_CASE("default microbatches are the largest divisor of the batch up to 2 per device", "[actors]") {
  CHECK(default_microbatches(32, 4) == 8);
  CHECK(default_microbatches(16, 3) == 4);
  CHECK(default_microbatches(16, 5) == 8);
  CHECK(default_microbatches(16, 6) == 8);
  CHECK(default_microbatches(16, 12) == 16);
  CHECK(default_microbatches(16, 16) == 16);
  CHECK(default_microbatches(12, 6) == 12);
  CHECK(default_microbatches(9, 2) == 3);
  CHECK(default_microbatches(7, 4) == 7);
  CHECK(default_microbatches(7, 2) == 1);
  CHECK(default_microbatches(1, 4) == 1);
}

TEST_CASE("auto partition says how many microbatches a 2bw run of its stages needs", "[actors]") {
  // Four layers of 1000 saved bytes on devices of 3500 bytes: one device cannot hold them all
  // (4000), so every plan has at least 2 stages, which 2bw cannot run with m = 1 < p.
  auto c = parse_cluster(R"({"devices": [{"speed": 1, "memory_bytes": 3500}, {"speed": 1, "memory_bytes": 3500},
                                          {"speed": 1, "memory_bytes": 3500}, {"speed": 1, "memory_bytes": 3500}]})");
  REQUIRE(c.ok());
  auto_partition_request rq;
  rq.schedule = schedule_kind::two_bw;
  rq.batch = 4;
  rq.microbatches = 1;
  auto a = plan_auto_partition(uniform_profile(4), *c, rq);
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.message(), Catch::Contains("m=1") && Catch::Contains("raise --microbatches to at least"));
  rq.batch = 16;
  rq.microbatches = 4;
  a = plan_auto_partition(uniform_profile(4), *c, rq);
  REQUIRE(a.ok());
  CHECK(a->p >= 2);
  CHECK(a->m >= a->p);
}

TEST_CASE("slowest_replica_speeds gives each stage its slowest replica's speed", "[actors]") {
  // Ranks are replica · p + stage: stage 0 runs on ranks 0 and 2, stage 1 on ranks 1 and 3.
  const std::vector<double> v = slowest_replica_speeds({0.5, 1.0, 0.25, 0.75}, 2);
  REQUIRE(v.size() == 2);
  CHECK(v[0] == 0.25);
  CHECK(v[1] == 0.75);
  CHECK(slowest_replica_speeds({0.5, 0.25}, 2) == std::vector<double>{0.5, 0.25});
}

TEST_CASE("auto partition with 2BW keeps a given batch only if the plan has it", "[actors]") {
  auto_partition_request rq;
  rq.planner = planner_kind::two_bw;
  rq.schedule = schedule_kind::two_bw;
  rq.batch = 7;  // b·m·w with m in {1 2 4} and w <= 4 never makes 7
  rq.microbatches = 1;
  rq.keep_batch = true;
  auto a = plan_auto_partition(uniform_profile(1), hetero(), rq);
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.message(), Catch::Contains("not --batch 7"));
  rq.keep_batch = false;
  a = plan_auto_partition(uniform_profile(1), hetero(), rq);
  REQUIRE(a.ok());
  CHECK(a->batch == a->microbatch * a->m * a->w);
}

TEST_CASE("profile costs sum each stage's times and carry its device speed", "[actors]") {
  const cost_model cm = profile_costs(uniform_profile(3), {0, 1, 3}, {0.5, 0.25}, 2.0);
  REQUIRE(cm.stages.size() == 2);
  REQUIRE(cm.devices.size() == 2);
  CHECK(cm.stages[0].forward == Approx(0.002));   // 1 ms x scale 2
  CHECK(cm.stages[1].backward == Approx(0.008));  // 2 layers x 2 ms x 2
  CHECK(cm.devices[0].speed == 0.5);
  CHECK(cm.devices[1].speed == 0.25);
  // One stage at speed 0.5: a step of one microbatch is (1 + 2) ms / 0.5.
  auto ms = simulate_step_ms(schedule_kind::one_f_one_b, 1, 1, 1,
                             profile_costs(uniform_profile(1), {0, 1}, {0.5}));
  REQUIRE(ms.ok());
  CHECK(*ms == Approx(6.0));
}

TEST_CASE("the printed plan names the layers and devices and speeds and the run", "[actors]") {
  auto_partition_request rq;
  rq.batch = 16;
  rq.microbatches = 4;
  auto a = plan_auto_partition(uniform_profile(3), hetero(), rq);
  REQUIRE(a.ok());
  const std::string text = format_auto_partition(*a, uniform_profile(3), "hetero.json");
  CHECK_THAT(text, Catch::Contains("planner pipedream on hetero.json"));
  CHECK_THAT(text, Catch::Contains("| 0 | l0..l" + std::to_string(a->stages[0].last_layer) + " | 0.."));
  for (std::size_t r = 0; r < a->device_names.size(); ++r) {
    char speed[32];
    std::snprintf(speed, sizeof speed, "%g", a->device_speed[r]);
    CHECK_THAT(text, Catch::Contains(a->device_names[r] + " (" + speed + ")"));
  }
  CHECK_THAT(text, Catch::Contains("run: 1f1b, " + std::to_string(a->p) + " stages x " +
                                   std::to_string(a->w) + " replicas, " + std::to_string(a->m) +
                                   " microbatches of 4 per replica (batch 16)"));
  CHECK_THAT(text, Catch::Contains("split 0"));
  CHECK_THAT(text, Catch::Contains("predicted step:"));
}

// A CPU core and a GPU (its own profile, ten times faster) planned at start-up: the GPU takes the
// heavy layers, its rank runs on cuda:0 at its own pace, the cores count only the CPU's rank.
TEST_CASE("auto partition places ranks on a GPU timed by its own profile", "[actors]") {
  model_profile cpu = uniform_profile(6);
  cpu.layers[0].fwd_ms = 0.05;  // a cheap first layer (an embedding), the same on both
  cpu.layers[0].bwd_ms = 0.1;
  model_profile gpu = cpu;
  for (std::size_t l = 1; l < gpu.layers.size(); ++l) {
    gpu.layers[l].fwd_ms /= 10;
    gpu.layers[l].bwd_ms /= 10;
  }
  auto c = parse_cluster(R"({"devices": [{"name": "core", "speed": 1},
    {"name": "h100", "speed": 1, "profile": "gpu.json", "device": "cuda:0"}]})");
  REQUIRE(c.ok());
  for (planner_kind planner : {planner_kind::pipedream, planner_kind::two_bw}) {
    CAPTURE(static_cast<int>(planner));
    // (one core: the GPU's rank needs no core of its own)
    const auto_partition_request rq = mixed_request(planner, 16, 4, 1, "gpu.json", gpu);
    auto a = plan_auto_partition(cpu, *c, rq);
    REQUIRE(a.ok());
    std::vector<int> on_gpu;
    for (std::size_t r = 0; r < a->rank_device.size(); ++r) {
      CHECK(a->run_devices[r] == (a->rank_device[r] == 1 ? "cuda:0" : "cpu"));
      if (a->rank_device[r] == 1) on_gpu.push_back(static_cast<int>(r % a->p));
    }
    REQUIRE(on_gpu.size() == 1);
    // The GPU's stage holds every heavy layer the CPU would be slower at.
    const planned_stage& st = a->stages[static_cast<std::size_t>(on_gpu[0])];
    CHECK(st.last_layer == 5);
    CHECK(st.last_layer - st.first_layer + 1 >= 5);
    CHECK(a->simulated_step_ms > 0);
  }
  // Without the profile it names, the planner refuses the device by name.
  auto_partition_request rq;
  rq.batch = 16;
  rq.microbatches = 4;
  auto none = plan_auto_partition(cpu, *c, rq);
  REQUIRE_FALSE(none.ok());
  CHECK(none.message().find("h100 names the profile gpu.json") != std::string::npos);
}

// Two cores and two GPUs: whatever the planner picks, rank replica * p + stage runs where its
// planned device says, and a stage whose replicas are all GPUs is simulated by the GPUs' profile.
TEST_CASE("auto partition maps ranks of replicated CPU and GPU stages to their run devices", "[actors]") {
  const model_profile cpu = uniform_profile(6);
  model_profile gpu = cpu;
  for (layer_profile& l : gpu.layers) {
    l.fwd_ms /= 10;
    l.bwd_ms /= 10;
  }
  auto c = parse_cluster(R"({"devices": [{"name": "core0", "speed": 1}, {"name": "core1", "speed": 1},
    {"name": "gpu0", "speed": 1, "profile": "g.json", "device": "cuda:0"},
    {"name": "gpu1", "speed": 1, "profile": "g.json", "device": "cuda:1"}]})");
  REQUIRE(c.ok());
  for (planner_kind planner : {planner_kind::pipedream, planner_kind::two_bw}) {
    CAPTURE(static_cast<int>(planner));
    const auto_partition_request rq = mixed_request(planner, 32, 8, 2, "g.json", gpu);
    auto a = plan_auto_partition(cpu, *c, rq);
    REQUIRE(a.ok());
    INFO("p=" << a->p << " w=" << a->w);
    bool all_gpu_stage = false;
    for (int s = 0; s < a->p; ++s) {
      bool all_gpu = true;
      for (int j = 0; j < a->w; ++j) {
        const auto r = static_cast<std::size_t>(j * a->p + s);
        const int d = a->stages[static_cast<std::size_t>(s)].devices.at(static_cast<std::size_t>(j));
        CHECK(a->rank_device[r] == d);
        CHECK(a->run_devices[r] == c->devices[static_cast<std::size_t>(d)].device);
        all_gpu = all_gpu && a->run_devices[r] != "cpu";
      }
      all_gpu_stage = all_gpu_stage || all_gpu;
    }
    // Every stage by the plan's (CPU) profile instead: never faster, slower when a stage is all GPUs.
    const double scale = static_cast<double>(a->microbatch) / static_cast<double>(cpu.microbatch);
    auto by_cpu = simulate_step_ms(
        a->schedule, a->p, a->m, a->w,
        profile_costs(cpu, a->boundaries, slowest_replica_speeds(a->device_speed, a->p), scale));
    REQUIRE(by_cpu.ok());
    CHECK(a->simulated_step_ms <= *by_cpu + 1e-9);
    if (all_gpu_stage) CHECK(a->simulated_step_ms < *by_cpu);
  }
}

TEST_CASE("auto partition refuses a CPU device with a profile of its own or one GPU named twice", "[actors]") {
  auto own = parse_cluster(R"({"devices": [{"name": "other-cpu", "speed": 1, "profile": "p.json"}]})");
  REQUIRE(own.ok());
  const status s = check_local_speeds(*own);
  REQUIRE(!s);
  CHECK(s.message().find("other-cpu names a profile of its own (p.json) but runs on a core") !=
        std::string::npos);
  auto twice = parse_cluster(R"({"devices": [{"name": "a", "speed": 1, "profile": "g.json",
    "device": "cuda"}, {"name": "b", "speed": 1, "profile": "g.json", "device": "cuda:0"}]})");
  REQUIRE(twice.ok());
  const status t = check_local_speeds(*twice);
  REQUIRE(!t);
  CHECK(t.message().find("a and b both run on cuda:0") != std::string::npos);
}

TEST_CASE("auto partition refuses a GPU device without its own profile or at another speed", "[actors]") {
  auto slow = parse_cluster(R"({"devices": [{"name": "h100", "speed": 0.5, "profile": "g.json",
    "device": "cuda"}]})");
  REQUIRE(slow.ok());
  const status s = check_local_speeds(*slow);
  REQUIRE(!s);
  CHECK(s.message().find("h100 runs on cuda at its own pace, so its speed must be 1") !=
        std::string::npos);
  auto bare = parse_cluster(R"({"devices": [{"name": "h100", "speed": 1, "device": "cuda:0"}]})");
  REQUIRE(bare.ok());
  const status t = check_local_speeds(*bare);
  REQUIRE(!t);
  CHECK(t.message().find("names no profile") != std::string::npos);
  CHECK(t.message().find("pipeworks profile --device cuda:0") != std::string::npos);
}

TEST_CASE("auto partition carries the profile's recompute mode into the run", "[actors][recompute]") {
  for (planner_kind planner : {planner_kind::pipedream, planner_kind::two_bw}) {
    for (recompute_mode mode :
         {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
      CAPTURE(planner_name(planner), recompute_name(mode));
      model_profile p = uniform_profile(4);
      p.recompute = mode;
      auto_partition_request rq;
      rq.planner = planner;
      rq.schedule = planner == planner_kind::two_bw ? schedule_kind::two_bw
                                                    : schedule_kind::one_f_one_b;
      rq.batch = 16;
      rq.microbatches = 4;
      auto a = plan_auto_partition(p, hetero(), rq);
      REQUIRE(a.ok());
      CHECK(a->recompute == mode);
      const std::string text = format_auto_partition(*a, p, "hetero.json");
      if (mode == recompute_mode::none)
        CHECK_THAT(text, !Catch::Contains("recompute"));
      else
        CHECK_THAT(text, Catch::Contains(", recompute " + std::string(recompute_name(mode))));
    }
  }
}

TEST_CASE("profile costs stash a stage's input per microbatch under full recompute", "[actors][recompute]") {
  model_profile p = uniform_profile(3);  // 1000 saved and 1000 output bytes a layer
  p.layers[0].activation_bytes = 300;
  const cost_model none = profile_costs(p, {0, 1, 3}, {1.0, 1.0}, 2.0);
  CHECK(none.stages[0].activation_bytes == 2000);
  CHECK(none.stages[1].activation_bytes == 4000);
  p.recompute = recompute_mode::full;
  const cost_model full = profile_costs(p, {0, 1, 3}, {1.0, 1.0}, 2.0);
  CHECK(full.stages[0].activation_bytes == 0);    // layer 0's input is not in the profile
  CHECK(full.stages[1].activation_bytes == 600);  // layer 0's 300-byte output, x scale 2
}

TEST_CASE("auto partition plans a V with the V planner: two stages per device, folded", "[actors]") {
  const cluster c = hetero();  // four devices
  auto_partition_request rq;
  rq.planner = planner_kind::v;
  rq.schedule = schedule_kind::zbv;
  rq.batch = 32;
  rq.microbatches = 8;
  auto a = plan_auto_partition(uniform_profile(8), c, rq);
  REQUIRE(a.ok());
  CHECK(a->w == 1);
  CHECK(a->m == 8);
  REQUIRE(a->stages.size() == static_cast<std::size_t>(2 * a->p));
  REQUIRE(a->boundaries.size() == a->stages.size() + 1);
  CHECK(a->boundaries.back() == 8);
  for (int s = 0; s < 2 * a->p; ++s) {
    const int d = stage_device(*a, s);
    CHECK(d == (s < a->p ? s : 2 * a->p - 1 - s));
    CHECK(a->stages[static_cast<std::size_t>(s)].devices == std::vector<int>{a->rank_device[static_cast<std::size_t>(d)]});
  }
  CHECK(a->simulated_step_ms > 0);
  const std::string text = format_auto_partition(*a, uniform_profile(8), "hetero");
  CHECK_THAT(text, Catch::Contains("two stages each, a V"));
  // A device that names its own profile is not the V planner's to time.
  auto_partition_request own = rq;
  own.device_profiles.emplace("gpu", uniform_profile(8));
  CHECK_FALSE(plan_auto_partition(uniform_profile(8), c, own).ok());
}
