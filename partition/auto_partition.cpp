// train --auto-partition's plan: runs PipeDream's or 2BW's planner, maps the plan onto the
// runtime (whole replicated pipelines, ranks throttled to their devices' speeds), and prints it.
#include "partition/auto_partition.hpp"
#include "partition/recompute_choice.hpp"

#include <tbb/task_arena.h>

#include <algorithm>
#include <map>
#include <cstdio>
#include <utility>

#include "ops/device/device.hpp"
#include "partition/profiler.hpp"
#include "partition/two_bw_planner.hpp"
#include "runtime/lower.hpp"
#include "runtime/simulate.hpp"

namespace pipeworks {
namespace {

std::string num(double x, const char* fmt = "%g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

// The runtime's shape from a plan's stages: w replicas of every stage, replica j of stage s
// on stages[s].devices[j].
status fill_ranks(auto_partition& out, const cluster& c) {
  out.p = static_cast<int>(out.stages.size());
  if (out.p < 1) return make_error("the planner returned no stages");
  out.w = out.stages[0].replicas;
  std::string counts;
  bool uneven = false;
  for (const planned_stage& s : out.stages) {
    if (!counts.empty()) counts += '-';
    counts += std::to_string(s.replicas);
    uneven = uneven || s.replicas != out.w ||
             static_cast<int>(s.devices.size()) != s.replicas;
  }
  if (uneven)
    return make_error("the plan replicates its stages " + counts +
                      " times, but the runtime replicates whole pipelines (every stage the same "
                      "number of times); use --planner 2bw, or a cluster with fewer devices");
  out.boundaries.clear();
  for (const planned_stage& s : out.stages) out.boundaries.push_back(s.first_layer);
  out.boundaries.push_back(out.stages.back().last_layer + 1);
  out.rank_device.assign(static_cast<std::size_t>(out.p * out.w), 0);
  out.device_speed.assign(out.rank_device.size(), 1.0);
  out.device_names.assign(out.rank_device.size(), "");
  out.run_devices.assign(out.rank_device.size(), named_device{});
  for (int j = 0; j < out.w; ++j)
    for (int s = 0; s < out.p; ++s) {
      const int d = out.stages[static_cast<std::size_t>(s)].devices[static_cast<std::size_t>(j)];
      const auto r = static_cast<std::size_t>(j * out.p + s);
      out.rank_device[r] = d;
      out.device_speed[r] = c.speed(d);
      out.device_names[r] = device_label(c, d);
      if (!c.devices.empty()) out.run_devices[r] = c.devices[static_cast<std::size_t>(d)].device;
    }
  return {};
}

// The runtime's shape from a V plan: one replica, rank d on the cluster's device placement[d]
// running virtual stages d and 2p-1-d; stages lists the 2p virtual stages.
status fill_v_ranks(auto_partition& out, const v_choice& choice, const cluster& c,
                    const model_profile& profile) {
  out.p = choice.devices;
  out.w = 1;
  out.boundaries = choice.plan.boundaries;
  out.stages.clear();
  // A V's 2p pieces, device d holding d and 2p-1-d; dualpipe's p, piece d on device d for the
  // route down (and its copy on device p-1-d for the route up).
  const int pieces = static_cast<int>(out.boundaries.size()) - 1;
  for (int s = 0; s < pieces; ++s) {
    const int d = s < out.p ? s : 2 * out.p - 1 - s;
    const int device = choice.plan.placement[static_cast<std::size_t>(d)];
    planned_stage st;
    st.first_layer = out.boundaries[static_cast<std::size_t>(s)];
    st.last_layer = out.boundaries[static_cast<std::size_t>(s) + 1] - 1;
    st.replicas = 1;
    st.devices = {device};
    for (int l = st.first_layer; l <= st.last_layer; ++l)  // this piece's, at its device's speed
      st.time_ms += (profile.layers[static_cast<std::size_t>(l)].fwd_ms +
                     profile.layers[static_cast<std::size_t>(l)].bwd_ms) / c.speed(device);
    st.memory_bytes = choice.plan.device_bytes[static_cast<std::size_t>(d)];
    out.stages.push_back(st);
  }
  out.rank_device.clear();
  out.device_speed.clear();
  out.device_names.clear();
  out.run_devices.clear();
  for (const int d : choice.plan.placement) {
    out.rank_device.push_back(d);
    out.device_speed.push_back(c.speed(d));
    out.device_names.push_back(device_label(c, d));
    out.run_devices.push_back(c.devices.empty() ? named_device{}
                                                : c.devices[static_cast<std::size_t>(d)].device);
  }
  return {};
}

// The throttled ranks must fit on this machine's cores (a GPU rank's thread mostly waits).
status check_cores(const auto_partition& out, int cores) {
  double need = 0;
  std::size_t on_cpu = 0;
  for (std::size_t r = 0; r < out.device_speed.size(); ++r)
    if (!out.run_devices.at(r).on_gpu()) {
      need += out.device_speed[r];
      ++on_cpu;
    }
  if (cores > 0 && need > cores + 1e-9)
    return make_error("the plan uses " + std::to_string(on_cpu) +
                      " CPU devices whose speeds add up to " + num(need) + " cores, but this "
                      "machine has " + std::to_string(cores) + "; use a cluster with fewer or "
                      "slower devices (speeds are fractions of one core), e.g. --cluster local-cpu");
  return {};
}

// PipeDream's plan whose w replicas share the step's `microbatches` evenly. The planner does not
// know m, so: plan on every device; while the plan's w does not divide m, plan again with one
// device fewer (max_devices). A plan's w is at most its devices and one device gives w = 1, so
// this ends. It keeps the planner's own choice whenever that fits, and otherwise the best plan
// on fewer devices, rather than changing the step's m, which the user (or the default) chose.
// Its limit: the planner breaks ties toward fewer stages, so an equally fast plan on the same
// devices with fewer replicas (more stages) that would divide m is not seen; the planner would
// need an option for the replica counts it may choose.
result<pipeline_plan> plan_pipedream_dividing(const model_profile& profile, const cluster& c,
                                              int microbatches,
                                              const std::map<std::string, model_profile>& own) {
  pipedream_options po;
  po.same_replicas = true;
  po.device_profiles = own;
  po.max_zero = 1;  // sharing a stage's optimizer state over its replicas when memory demands it
  int first_w = 0;  // the replicas of the plan on every device, when it did not divide
  for (int devices = c.device_count(); devices >= 1; --devices) {
    po.max_devices = devices;
    // A device list is planned with each device's own speed and memory.
    auto plan = plan_pipedream(profile, c, po);
    if (!plan && first_w == 0) return plan.err();
    if (!plan)
      return make_error("the best plan runs " + std::to_string(first_w) + " replicas, which " +
                        "cannot share " + std::to_string(microbatches) + " microbatches evenly, " +
                        "and on " + std::to_string(devices) + " devices: " + plan.message() +
                        "; give a multiple of " + std::to_string(first_w) + " as --microbatches");
    const int w = plan->stages.empty() ? 1 : plan->stages[0].replicas;
    if (w >= 1 && microbatches % w == 0) return plan;
    if (first_w == 0) first_w = w;
  }
  return make_error("no plan shares " + std::to_string(microbatches) +
                    " microbatches evenly among its replicas");
}

}  // namespace

status check_local_speeds(const cluster& c) {
  std::map<int, std::string> gpus;  // GPU number -> the device that runs on it
  for (std::size_t d = 0; d < c.devices.size(); ++d) {
    const device_spec& s = c.devices[d];
    const std::string name = device_label(c, static_cast<int>(d));
    if (!s.device.on_gpu()) {
      if (!s.profile.empty())
        return make_error("the cluster's " + name + " names a profile of its own (" + s.profile +
                          ") but runs on a core of this machine, throttled by its speed: give the "
                          "\"device\" it was measured on (cuda:N), or plan with `pipeworks plan`");
      continue;
    }
    const std::string on = s.device.to_string();
    auto [it, fresh] = gpus.try_emplace(s.device.where.index, name);
    if (!fresh)
      return make_error("the cluster's " + it->second + " and " + name + " both run on " +
                        s.device.where.to_string() + ": one GPU is one device of the plan");
    if (s.speed != 1.0)
      return make_error("the cluster's " + name + " runs on " + on + " at its own pace, so " +
                        "its speed must be 1, not " + num(s.speed) + ": how fast it is comes " +
                        "from the profile measured there");
    if (s.profile.empty())
      return make_error("the cluster's " + name + " runs on " + on + " but names no " +
                        "profile: measure one there (pipeworks profile --device " + on +
                        " --microbatch B --out gpu-profile.json, B the run's microbatch: batch / "
                        "microbatches, which the plan's first line names) and give it as "
                        "\"profile\"");
  }
  for (int d = 0; d < c.device_count(); ++d) {
    const bool gpu = !c.devices.empty() && c.devices[static_cast<std::size_t>(d)].device.on_gpu();
    if (!gpu && c.speed(d) > 1.0)
      return make_error("the cluster's " + device_label(c, d) + " has speed " + num(c.speed(d)) +
                        ", but a local run throttles CPU cores: speeds are relative to one core "
                        "of this machine and must be at most 1 (divide every speed by " +
                        num(c.speed(d)) + ", or plan such clusters with `pipeworks plan`)");
  }
  return {};
}

int default_microbatches(std::int64_t batch, int devices) {
  const std::int64_t most = 2 * static_cast<std::int64_t>(std::max(1, devices));
  for (std::int64_t m = std::min(most, batch); m > 1; --m)
    if (batch % m == 0) return static_cast<int>(m);
  return 1;
}

std::vector<double> slowest_replica_speeds(const std::vector<double>& rank_speed, int p) {
  std::vector<double> stage_speed(static_cast<std::size_t>(std::max(0, p)), 1.0);
  for (std::size_t r = 0; p > 0 && r < rank_speed.size(); ++r) {
    double& s = stage_speed[r % static_cast<std::size_t>(p)];
    s = std::min(s, rank_speed[r]);  // microbatches go round-robin: the slowest sets the pace
  }
  return stage_speed;
}

result<model_profile> profile_on_one_core(const model<float>& net, const minibatch& sample,
                                          recompute_mode recompute) {
  result<model_profile> prof = make_error("not profiled");
  profiler_options po;
  po.recompute = recompute;
  tbb::task_arena one_core(1);  // a device of speed 1 is one core, as each rank's arena
  one_core.execute([&] { prof = profile_model(net, sample, po); });
  if (prof) prof->model = net.name();
  return prof;
}

result<model_profile> profile_every_mode_on_one_core(const model<float>& net,
                                                     const minibatch& sample) {
  std::vector<model_profile> measured;
  for (recompute_mode mode :
       {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
    auto one = profile_on_one_core(net, sample, mode);
    if (!one) return one.err();
    measured.push_back(std::move(*one));
  }
  return merge_modes(measured.front(), {measured.begin() + 1, measured.end()});
}

cost_model profile_costs(const model_profile& profile, const std::vector<int>& boundaries,
                         const std::vector<double>& stage_speed, double scale) {
  const std::vector<const model_profile*> same(boundaries.empty() ? 0 : boundaries.size() - 1,
                                               &profile);
  return profile_costs(same, boundaries, stage_speed, scale);
}

cost_model profile_costs(const std::vector<const model_profile*>& stage_profile,
                         const std::vector<int>& boundaries,
                         const std::vector<double>& stage_speed, double scale) {
  cost_model cm;
  cm.stages.clear();
  cm.devices.clear();
  for (std::size_t s = 0; s + 1 < boundaries.size(); ++s) {
    stage_cost sc;
    double fwd = 0, bwd = 0;
    std::int64_t saved = 0, params = 0;
    const model_profile& profile = *stage_profile.at(s);
    for (int l = boundaries[s]; l < boundaries[s + 1]; ++l) {
      const layer_profile& lp = profile.layers.at(static_cast<std::size_t>(l));
      fwd += lp.fwd_ms;
      bwd += lp.bwd_ms;
      saved += lp.saved_bytes;
      params += lp.param_bytes;
    }
    sc.forward = fwd * scale / 1000.0;
    sc.backward = bwd * scale / 1000.0;
    sc.weight_grad = sc.backward / 2;
    sc.step = 0;
    // Full recomputation stashes each microbatch's input (the stage's first layer's).
    const std::int64_t held = profile.recompute == recompute_mode::full
                                  ? input_bytes(profile, boundaries[s])
                                  : saved;
    sc.activation_bytes = static_cast<std::int64_t>(static_cast<double>(held) * scale);
    sc.param_bytes = params;
    cm.stages.push_back(sc);
    cm.devices.push_back(device_cost{s < stage_speed.size() ? stage_speed[s] : 1.0, 0});
  }
  return cm;
}

result<double> simulate_step_ms(schedule_kind kind, int p, int m, int w, cost_model costs) {
  auto made = make_schedule(kind, schedule_params{p, m, default_chunks(kind), w, 2});
  if (!made) return made.err();
  // profile_costs gives each virtual stage its device's speed: the devices are the first p.
  if (costs.devices.size() > static_cast<std::size_t>(p)) costs.devices.resize(static_cast<std::size_t>(p));
  simulate_options so;
  so.record_timeline = false;
  auto sim = simulate(lower_communication(std::move(*made)), costs, so);
  if (!sim) return sim.err();
  return 1000.0 * sim->makespan / 2;
}

result<auto_partition> plan_auto_partition(const model_profile& profile, const cluster& c,
                                           const auto_partition_request& rq) {
  if (status s = check_local_speeds(c); !s) return make_error(s.message());
  if (rq.microbatches < 1 || rq.batch < 1 || rq.batch % rq.microbatches != 0)
    return make_error("the batch " + std::to_string(rq.batch) + " must be a positive multiple of "
                      "the microbatches " + std::to_string(rq.microbatches));
  auto_partition out;
  out.planner = rq.planner;
  out.schedule = rq.schedule;
  out.recompute = profile.recompute;
  double scale = 1.0;  // the run's microbatch over the profile's
  if (rq.planner == planner_kind::pipedream) {
    auto plan = plan_pipedream_dividing(profile, c, rq.microbatches, rq.device_profiles);
    if (!plan) return make_error("PipeDream's planner: " + plan.message());
    out.stages = plan->stages;
    out.planner_step_ms = plan->predicted_step_ms;
    out.recompute = plan->recompute;
    out.recompute_choice = plan->recompute_choice;
    out.zero = plan->zero;
    if (status s = fill_ranks(out, c); !s) return make_error(s.message());
    if (status s = check_cores(out, rq.cores); !s) return make_error(s.message());
    out.m = rq.microbatches / out.w;
    out.microbatch = rq.batch / rq.microbatches;
    out.batch = rq.batch;
    scale = static_cast<double>(out.microbatch) / static_cast<double>(profile.microbatch);
  } else if (rq.planner == planner_kind::v) {
    if (!rq.device_profiles.empty())
      return make_error("the V planner times every device with the run's own profile; a device "
                        "that names a profile of its own is not planned by it: drop the "
                        "device's \"profile\", or train the V with --stages and --split");
    auto choice = plan_v_devices(profile, c, rq.schedule, rq.microbatches);
    if (!choice) return make_error("the V planner: " + choice.message());
    if (status s = fill_v_ranks(out, *choice, c, profile); !s) return make_error(s.message());
    if (status s = check_cores(out, rq.cores); !s) return make_error(s.message());
    out.planner_step_ms = choice->step_ms;
    out.m = rq.microbatches;
    out.microbatch = rq.batch / rq.microbatches;
    out.batch = rq.batch;
    scale = static_cast<double>(out.microbatch) / static_cast<double>(profile.microbatch);
  } else {
    two_bw_options to;
    to.device_profiles = rq.device_profiles;
    auto plan = plan_two_bw(profile, c, to);
    if (!plan) return make_error("2BW's planner: " + plan.message());
    out.stages = plan->stages;
    out.planner_step_ms = plan->step_ms;
    out.recompute = plan->recompute;
    out.recompute_choice = plan->recompute_choice;
    out.zero = plan->zero;
    if (status s = fill_ranks(out, c); !s) return make_error(s.message());
    if (status s = check_cores(out, rq.cores); !s) return make_error(s.message());
    out.m = plan->m;
    out.microbatch = plan->b;
    out.batch = plan->b * plan->m * plan->w;
    if (rq.keep_batch && out.batch != rq.batch)
      return make_error("2BW's planner chose " + std::to_string(plan->w) + " replicas x " +
                        std::to_string(plan->m) + " microbatches of " + std::to_string(plan->b) +
                        " samples, a batch of " + std::to_string(out.batch) + ", not --batch " +
                        std::to_string(rq.batch) + "; drop --batch to train with the planner's, "
                        "or use --planner pipedream, which keeps --batch");
    scale = static_cast<double>(out.microbatch) / static_cast<double>(profile.microbatch);
  }
  // The figures of the plan's mode (a profile of several modes: the one the planner chose).
  const bool several = profile_modes(profile).size() > 1;
  const model_profile in_mode = several ? profile_in_mode(profile, out.recompute) : profile;
  std::map<std::string, model_profile> own_in_mode = rq.device_profiles;
  if (several) {
    auto own = device_profiles_in_mode(rq.device_profiles, out.recompute);
    if (!own) return make_error(own.message());
    own_in_mode = std::move(*own);
  }
  // Each stage at its slowest replica, each replica by its device's own profile when it names one.
  std::vector<const model_profile*> stage_profile(out.stages.size(), &in_mode);
  std::vector<double> stage_speed = slowest_replica_speeds(out.device_speed, out.p);
  if (rq.planner == planner_kind::v)  // a V: virtual stage s on device s or 2p-1-s
    for (std::size_t s = static_cast<std::size_t>(out.p); s < out.stages.size(); ++s)
      stage_speed.push_back(out.device_speed[out.stages.size() - 1 - s]);
  if (!rq.device_profiles.empty() && !c.devices.empty() && rq.planner != planner_kind::v)
    for (int s = 0; s < out.p; ++s) {
      double slowest = -1;
      for (int j = 0; j < out.w; ++j) {
        const auto r = static_cast<std::size_t>(j * out.p + s);
        const device_spec& d = c.devices.at(static_cast<std::size_t>(out.rank_device[r]));
        const model_profile& own = d.profile.empty() ? in_mode : own_in_mode.at(d.profile);
        double ms = 0;
        for (int l = out.boundaries[s]; l < out.boundaries[s + 1]; ++l)
          ms += own.layers.at(static_cast<std::size_t>(l)).fwd_ms +
                own.layers.at(static_cast<std::size_t>(l)).bwd_ms;
        if (ms / out.device_speed[r] > slowest) {
          slowest = ms / out.device_speed[r];
          stage_profile[static_cast<std::size_t>(s)] = &own;
          stage_speed[static_cast<std::size_t>(s)] = out.device_speed[r];
        }
      }
    }
  auto sim = simulate_step_ms(out.schedule, out.p, out.m, out.w,
                              profile_costs(stage_profile, out.boundaries, stage_speed, scale));
  if (!sim) {
    std::string what = "the planned run (" + std::string(schedule_name(out.schedule)) + ", p=" +
                       std::to_string(out.p) + ", m=" + std::to_string(out.m) + ", w=" +
                       std::to_string(out.w) + ") cannot run: " + sim.message();
    // Pipelines with fewer microbatches per replica than stages fail in some schedules (2bw):
    // say how many the step needs, since the user gave the step's count, not m.
    if (out.m < out.p && rq.planner == planner_kind::pipedream)
      what += "; raise --microbatches to at least " + std::to_string(out.p * out.w) + " (" +
              std::to_string(out.p) + " stages x " + std::to_string(out.w) +
              " replicas, so that each replica gets at least one microbatch per stage), keeping "
              "--batch divisible by it";
    return make_error(what);
  }
  out.simulated_step_ms = *sim;
  return out;
}

std::string format_auto_partition(const auto_partition& a, const model_profile& profile,
                                  const std::string& cluster_name) {
  std::string t = "auto-partition: planner " + planner_name(a.planner) + " on " + cluster_name +
                  ", " + profile.model + " profiled at microbatch " +
                  std::to_string(profile.microbatch) + " on one core\n";
  t += "| stage | layers | blocks | replicas | devices (speed) | ms per microbatch |\n";
  t += "|---:|---|---|---:|---|---:|\n";
  for (int s = 0; s < static_cast<int>(a.stages.size()); ++s) {
    const planned_stage& st = a.stages[static_cast<std::size_t>(s)];
    std::string devs;
    for (int j = 0; j < a.w; ++j) {
      const auto r = static_cast<std::size_t>(j * a.p + stage_device(a, s));
      devs += (j ? ", " : "") + a.device_names[r] + " (" + num(a.device_speed[r]) + ")";
    }
    t += "| " + std::to_string(s) + " | " +
         profile.layers.at(static_cast<std::size_t>(st.first_layer)).name + ".." +
         profile.layers.at(static_cast<std::size_t>(st.last_layer)).name + " | " +
         std::to_string(st.first_layer) + ".." + std::to_string(st.last_layer) + " | " +
         std::to_string(st.replicas) + " | " + devs + " | " + num(st.time_ms, "%.3f") + " |\n";
  }
  std::string split;
  for (std::size_t s = 0; s < a.stages.size(); ++s)
    split.append(s ? "," : "").append(std::to_string(a.boundaries[s]));
  t += "run: " + std::string(schedule_name(a.schedule)) + ", " + std::to_string(a.p) +
       (a.stages.size() > static_cast<std::size_t>(a.p) ? " devices (two stages each, a V)"
        : a.schedule == schedule_kind::dualpipe       ? " devices (each stage on two, mirrored)"
                                                         : " stages") +
       " x " + std::to_string(a.w) + " replicas, " + std::to_string(a.m) +
       " microbatches of " + std::to_string(a.microbatch) + " per replica (batch " +
       std::to_string(a.batch) + "), split " + split +
       (a.recompute != recompute_mode::none
            ? ", recompute " + std::string(recompute_name(a.recompute))
            : std::string()) +
       (a.zero > 0 ? ", zero " + std::to_string(a.zero) : std::string()) + "\n";
  if (!a.recompute_choice.empty()) t += "recompute: " + a.recompute_choice + "\n";
  t += "predicted step: " + num(a.planner_step_ms, "%.3f") + " ms (the planner's estimate), " +
       num(a.simulated_step_ms, "%.3f") + " ms (this run's schedule simulated)\n";
  return t;
}

}  // namespace pipeworks
