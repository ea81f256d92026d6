// `train --auto-partition`: checks its flags and its cluster before anything loads.
#include "cli/auto_partition.hpp"

#include <string>

#include "partition/auto_partition.hpp"
#include "partition/cluster.hpp"
#include "partition/plan_inputs.hpp"
#include "runtime/schedule.hpp"

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
  const auto kind = parse_schedule_kind(f.schedule);
  const bool v = kind && v_planned(*kind);
  if (f.planner.empty()) f.planner = f.schedule == "2bw" ? "2bw" : v ? "v" : "pipedream";
  if ((f.planner == "v") != v)
    throw CLI::ValidationError("--planner", "the V planner plans the V schedules (zbv, v-half, "
                                            "v-min, dualpipev) and dualpipe, and they need it: "
                                            "drop --planner, "
                                            "or pick a schedule for " + f.planner);
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

void check_cluster_flag(const pipeline_flags& f) {
  if (!f.auto_partition) return;
  auto c = load_cluster(f.cluster);
  if (!c) throw CLI::ValidationError("--cluster", c.message());
  if (status s = check_local_speeds(*c); !s) throw CLI::ValidationError("--cluster", s.message());
  // The profiles the devices name (a GPU's, measured there) must be there before the run profiles.
  if (auto own = load_device_profiles(*c, f.cluster); !own)
    throw CLI::ValidationError("--cluster", own.message());
}

}  // namespace pipeworks::cli
