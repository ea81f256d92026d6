// `train --auto-partition`: checks its flags, profiles the model on one core, plans with
// actors/auto_partition.hpp's pure planner, prints the plan and turns it into pipeline flags.
#include "cli/auto_partition.hpp"

#include <cstdio>
#include <string>

#include "cli/options.hpp"
#include "partition/cpu_count.hpp"

namespace pipeworks::cli {

void check_auto_partition_flags(pipeline_flags& f) {
  auto given = [&](const char* flag) { return f.given.count(flag) > 0; };
  if (!f.auto_partition) {
    for (const char* flag : {"--cluster", "--planner"})
      if (given(flag))
        throw CLI::ValidationError(flag, std::string(flag) +
                                             " plans the run: add --auto-partition (or use "
                                             "`pipeworks plan` to plan without training)");
    return;
  }
  for (const char* flag : {"--stages", "--replicas", "--chunks", "--split"})
    if (given(flag))
      throw CLI::ValidationError(flag, "--auto-partition chooses the stages, replicas and split: "
                                       "drop " + std::string(flag) +
                                       ", or drop --auto-partition to set them yourself");
  if (given("--schedule") && f.schedule == "none")
    throw CLI::ValidationError("--schedule", "--auto-partition plans a pipeline: give a pipeline "
                                             "schedule (e.g. 1f1b or 2bw) or leave --schedule out");
  if (f.planner.empty()) f.planner = f.schedule == "2bw" ? "2bw" : "pipedream";
  if (!given("--schedule")) f.schedule = f.planner == "2bw" ? "2bw" : "1f1b";
  if (f.planner == "2bw" && f.schedule != "2bw")
    throw CLI::ValidationError("--planner", "2BW's planner plans for --schedule 2bw, not " +
                                                f.schedule + "; drop one of the two");
  if (f.planner == "2bw" && given("--microbatches"))
    throw CLI::ValidationError("--microbatches",
                               "2BW's planner chooses the microbatches and their size: drop "
                               "--microbatches (or use --planner pipedream, which keeps them)");
  // Each rank runs its kernels on one thread: a device of speed 1 is the one core it was profiled
  // on, and the throttle measures the rank's own CPU time. More threads would break both.
  if (given("--threads"))
    throw CLI::ValidationError("--threads",
                               "--auto-partition runs every rank on one thread (a device of speed 1 "
                               "is one core, as profiled): drop --threads, or drop "
                               "--auto-partition and set --stages and --replicas yourself");
}

planned_run auto_partition_flags(pipeline_flags& f, const model<float>& net,
                                 const std::function<minibatch(std::int64_t)>& sample,
                                 std::int64_t& batch, int& microbatches, bool quiet) {
  auto kind = parse_schedule_kind(f.schedule);
  if (!kind) throw CLI::ValidationError("--schedule", kind.message());
  auto c = load_cluster(f.cluster);
  if (!c) throw CLI::ValidationError("--cluster", c.message());
  if (status s = check_local_speeds(*c); !s) throw CLI::ValidationError("--cluster", s.message());
  // PipeDream: without --microbatches the step gets 2 per device (so most replica counts share
  // them evenly), or the largest divisor of --batch below that; the plan's w then divides them.
  if (f.planner == "pipedream" && f.given.count("--microbatches") == 0)
    microbatches = default_microbatches(batch, c->device_count());
  planned_run run;
  const std::int64_t b = batch / microbatches;
  auto prof = profile_on_one_core(net, sample(b));
  if (!prof) throw pipeworks_error("--auto-partition: profiling failed: " + prof.message());
  run.profile = std::move(*prof);
  auto_partition_request rq;
  rq.planner = f.planner == "2bw" ? planner_kind::two_bw : planner_kind::pipedream;
  rq.schedule = *kind;
  rq.batch = batch;
  rq.microbatches = microbatches;
  rq.keep_batch = f.given.count("--batch") > 0;
  rq.cores = usable_cores();
  auto plan = plan_auto_partition(run.profile, *c, rq);
  // The flags were fine; the planner found no plan that runs here: a failure (exit 1), not usage.
  if (!plan) throw pipeworks_error("--auto-partition: " + plan.message());
  run.plan = std::move(*plan);
  const auto_partition& a = run.plan;
  f.stages = a.p;
  f.replicas = a.w;
  f.split.clear();
  for (int s = 0; s < a.p; ++s)
    f.split += (s ? "," : "") + std::to_string(a.boundaries[static_cast<std::size_t>(s)]);
  batch = a.batch;
  microbatches = a.m;
  if (!quiet) {
    std::fputs(format_auto_partition(a, run.profile, f.cluster).c_str(), stdout);
    std::fflush(stdout);
  }
  return run;
}

nlohmann::json plan_json(const planned_run& run, const std::string& cluster_name) {
  const auto_partition& a = run.plan;
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < a.p; ++s) {
    const planned_stage& st = a.stages[static_cast<std::size_t>(s)];
    std::vector<std::string> devices;
    std::vector<double> speeds;
    for (int j = 0; j < a.w; ++j) {
      devices.push_back(a.device_names[static_cast<std::size_t>(j * a.p + s)]);
      speeds.push_back(a.device_speed[static_cast<std::size_t>(j * a.p + s)]);
    }
    stages.push_back({{"first_layer", st.first_layer},
                      {"last_layer", st.last_layer},
                      {"replicas", st.replicas},
                      {"devices", devices},
                      {"speeds", speeds},
                      {"time_ms", st.time_ms}});
  }
  return {{"planner", planner_name(a.planner)},
          {"cluster", cluster_name},
          {"p", a.p},
          {"w", a.w},
          {"m", a.m},
          {"microbatch", a.microbatch},
          {"batch", a.batch},
          {"stages", stages},
          {"predicted_step_ms", a.planner_step_ms},
          {"simulated_step_ms", a.simulated_step_ms}};
}

}  // namespace pipeworks::cli
