// resolve_plan: the split, or a profile and a plan, written into the run plan.
#include "partition/plan_resolve.hpp"

#include <type_traits>

#include "partition/auto_partition.hpp"
#include "partition/cluster.hpp"
#include "base/cpu_count.hpp"
#include "partition/even_split.hpp"
#include "partition/plan_inputs.hpp"

namespace pipeworks {
namespace {

nlohmann::json summary_json(const auto_partition& a, const std::string& cluster_name) {
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < static_cast<int>(a.stages.size()); ++s) {
    const planned_stage& st = a.stages[static_cast<std::size_t>(s)];
    std::vector<std::string> devices;
    std::vector<double> speeds;
    for (int j = 0; j < a.w; ++j) {
      devices.push_back(a.device_names[static_cast<std::size_t>(j * a.p + stage_device(a, s))]);
      speeds.push_back(a.device_speed[static_cast<std::size_t>(j * a.p + stage_device(a, s))]);
    }
    stages.push_back({{"first_layer", st.first_layer},
                      {"last_layer", st.last_layer},
                      {"replicas", st.replicas},
                      {"devices", devices},
                      {"speeds", speeds},
                      {"time_ms", st.time_ms}});
  }
  nlohmann::json out = {{"planner", planner_name(a.planner)},
          {"cluster", cluster_name},
          {"p", a.p},
          {"w", a.w},
          {"m", a.m},
          {"microbatch", a.microbatch},
          {"batch", a.batch},
          {"stages", stages},
          {"recompute", std::string(recompute_name(a.recompute))},
          {"predicted_step_ms", a.planner_step_ms},
          {"simulated_step_ms", a.simulated_step_ms}};
  if (!a.recompute_choice.empty()) out["recompute_choice"] = a.recompute_choice;
  if (a.zero > 0) out["zero"] = a.zero;
  return out;
}

result<resolved_plan> plan_automatically(run_plan plan, const model<float>& net,
                                         const sample_fn& sample) {
  const auto_partition_spec ap = *plan.auto_partition;
  auto c = load_cluster(ap.cluster);
  if (!c) return c.err();
  if (status s = check_local_speeds(*c); !s) return make_error(s.message());
  // A GPU's (or any other kind of device's) own profile, measured there beforehand.
  auto own = load_device_profiles(*c, ap.cluster);
  if (!own) return own.err();
  int microbatches = plan.train.microbatches;
  if (ap.planner != planner_kind::two_bw && !ap.keep_microbatches)
    microbatches = default_microbatches(plan.data.batch, c->device_count());
  auto drawn = sample(plan.data.batch / microbatches);
  if (!drawn) return make_error("the sample to profile: " + drawn.message());
  // Measured in the run's mode when --recompute gives it, so the planner counts the memory the run
  // holds; otherwise, on a cluster that limits a device's memory, in every mode, and the planner
  // chooses the fastest that fits. Without a limit none always fits and recomputing only adds
  // work (a live profile could show otherwise only by noise), so none is measured alone.
  bool limited = false;
  for (int d = 0; d < c->device_count(); ++d) limited = limited || c->memory(d) > 0;
  auto prof = ap.choose_recompute && limited ? profile_every_mode_on_one_core(net, *drawn)
                                             : profile_on_one_core(net, *drawn, plan.recompute);
  if (!prof) return make_error("profiling failed: " + prof.message());
  auto_partition_request rq;
  rq.planner = ap.planner;
  rq.schedule = *plan.schedule;
  rq.batch = plan.data.batch;
  rq.microbatches = microbatches;
  rq.keep_batch = ap.keep_batch;
  rq.cores = usable_cores();
  rq.device_profiles = std::move(*own);
  auto a = plan_auto_partition(*prof, *c, rq);
  if (!a) return a.err();
  resolved_plan out;
  out.report = format_auto_partition(*a, *prof, ap.cluster);
  out.summary = summary_json(*a, ap.cluster);
  plan.stages = a->p;
  plan.replicas = a->w;
  plan.chunks = default_chunks(*plan.schedule);  // a V: two per device
  plan.train.microbatches = a->m;
  plan.data.batch = a->batch;
  plan.split.assign(a->boundaries.begin(), a->boundaries.end() - 1);
  plan.ranks.clear();
  for (std::size_t r = 0; r < a->device_speed.size(); ++r)
    plan.ranks.push_back(
        rank_placement{a->run_devices[r], a->device_speed[r], a->device_names[r], 0});
  plan.recompute = a->recompute;  // the mode the plan assumed (the profile's, or the one it chose)
  plan.zero = a->zero;            // and the ZeRO level it counted the optimizer state with
  plan.threads_per_stage = 1;  // a device of speed 1 is the one core it was profiled on
  plan.auto_partition.reset();
  if (auto i = first_issue(plan, net.size()))
    return make_error("the plan for the cluster cannot run: " +
                      render(*i, [](std::string_view f) { return std::string(f); }));
  out.plan = std::move(plan);
  return out;
}

}  // namespace

template <class T>
result<resolved_plan> resolve_plan(run_plan plan, const model<T>& net, const sample_fn& sample) {
  if (plan.auto_partition) {
    if constexpr (std::is_same_v<T, float>) {
      return plan_automatically(std::move(plan), net, sample);
    } else {
      return make_error("automatic partitioning profiles float models only");
    }
  }
  resolved_plan out;
  if (plan.schedule && plan.split.empty()) {
    auto b = even_split(net.costs(), plan.model_stages());
    if (!b) return b.err();
    plan.split.assign(b->begin(), b->end() - 1);
  }
  out.plan = std::move(plan);
  return out;
}

template result<resolved_plan> resolve_plan<float>(run_plan, const model<float>&, const sample_fn&);
template result<resolved_plan> resolve_plan<double>(run_plan, const model<double>&, const sample_fn&);

}  // namespace pipeworks
