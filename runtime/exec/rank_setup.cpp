// lower_run and rank_setup: the one place that turns a run plan into the ranks' setups.
#include "runtime/exec/rank_setup.hpp"

#include "ops/model/model.hpp"
#include "runtime/lower.hpp"
#include "runtime/plan_schedule.hpp"
#include "runtime/program_walk.hpp"
#include "runtime/validate.hpp"

namespace pipeworks {

result<std::shared_ptr<const schedule>> prepare_programs(schedule lowered, const run_plan& plan) {
  if (plan.clips_globally() && plan.train.clip_grad_norm > 0)
    lowered = gather_steps(std::move(lowered));
  if (status s = validate(lowered); !s)
    return make_error("the lowered schedule is not valid: " + s.message());
  return std::make_shared<const schedule>(std::move(lowered));
}

result<std::shared_ptr<const schedule>> plan_programs(const run_plan& plan) {
  auto made = plan_schedule(plan, static_cast<int>(plan.train.steps));
  if (!made) return made.err();
  return prepare_programs(std::move(*made), plan);
}

result<lowered_run> lower_run(run_plan plan, int blocks) {
  if (plan.auto_partition)
    return make_error("the plan asks for automatic partitioning, which has not run yet");
  lowered_run out;
  if (!plan.schedule) {
    out.boundaries = {0, blocks};
    out.plan = std::move(plan);
    return out;
  }
  const int V = plan.model_stages();
  if (plan.split.empty()) {
    if (V != 1) return make_error("the plan's split is not resolved (" + std::to_string(V) + " stages)");
    plan.split = {0};
  }
  out.boundaries = plan.split;
  out.boundaries.push_back(blocks);
  auto programs = plan_programs(plan);
  if (!programs) return programs.err();
  out.programs = std::move(*programs);
  out.credit_window = plan.credits > 0 ? plan.credits : min_credit_window(*out.programs);
  out.plan = std::move(plan);
  return out;
}

result<lowered_run> read_lowered_run(std::string_view text, const std::string& source, int blocks) {
  auto plan = parse_run_plan(text, source, blocks);
  if (!plan) return plan.err();
  if (blocks < 0) blocks = build_model<float>(plan->model).size();
  return lower_run(std::move(*plan), blocks);
}

executor_setup rank_setup(const lowered_run& run, int rank) {
  const run_plan& p = run.plan;
  executor_setup s;
  s.plan = run.programs;
  s.replica = rank / p.stages;
  s.device = rank % p.stages;
  s.boundaries = run.boundaries;
  s.train = p.train;
  s.credit_window = run.credit_window;
  s.speed = p.ranks.empty() ? 1.0 : p.ranks.at(static_cast<std::size_t>(rank)).speed;
  if (!p.ranks.empty()) s.where = p.ranks.at(static_cast<std::size_t>(rank)).device.where;
  s.tf32 = p.tf32;
  s.bf16 = p.bf16;
  s.recompute = p.recompute;
  s.zero = p.zero;
  s.offload = p.offload;
  s.memory_limit = p.memory_limit;
  for (const rank_placement& r : p.ranks) {
    s.rank_devices.push_back(r.device.where);
    s.rank_processes.push_back(r.process);
  }
  s.reduce_on_gpu = gpu_reduce_device(run, 0).has_value();
  s.global_clip = p.clips_globally() && p.train.clip_grad_norm > 0;
  s.checkpoint_every = p.checkpoint.every;
  s.weights_every = p.weights_every;
  s.first_step = p.data.position;
  return s;
}

std::optional<device> gpu_reduce_device(const lowered_run& run, int piece) {
  const run_plan& p = run.plan;
  if (!run.programs || run.programs->reduce_group_size() <= 1) return std::nullopt;
  if (p.reduce != reduce_mode::collective || p.zero > 0 || p.ranks.empty()) return std::nullopt;
  for (const rank_placement& r : p.ranks)
    if (!r.device.on_gpu() || r.process != 0) return std::nullopt;
  const schedule& s = *run.programs;
  const int rank = s.rank_of(0, s.device_of.at(static_cast<std::size_t>(piece)));
  return p.ranks.at(static_cast<std::size_t>(rank)).device.where;
}

}  // namespace pipeworks
