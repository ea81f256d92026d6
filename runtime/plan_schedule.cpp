// The run plan's schedule, built-in or from a file's programs; see plan_schedule.hpp.
#include "runtime/plan_schedule.hpp"

#include "runtime/lower.hpp"
#include "runtime/schedule_file.hpp"

namespace pipeworks {


result<schedule> plan_schedule(const run_plan& plan, int steps) {
  if (!plan.schedule) return make_error("the plan has no schedule (none runs on one device)");
  if (plan.programs.empty()) {
    const schedule_params sp{plan.stages, plan.train.microbatches, plan.chunks, plan.replicas,
                             steps > 0 ? steps : 1, plan.reduce};
    auto made = make_schedule(*plan.schedule, sp);
    if (!made) return made.err();
    return lower_communication(std::move(*made));
  }
  auto file = parse_schedule_file(plan.programs);
  if (!file) return file.err();
  if (file->routes != plan.routes())
    return make_error("the plan's programs name " + std::to_string(file->routes) +
                      " routes in a line the plan reads as " + std::to_string(plan.routes()) +
                      ": write it as \"# routes: 2\" on a line of its own");
  auto shape = shape_of(*file, plan.replicas);
  if (!shape) return shape.err();
  // Two routes (dualpipe) run half the step's microbatches each.
  if (shape->stages != plan.stages || shape->chunks != plan.chunks ||
      shape->microbatches * file->routes != plan.train.microbatches)
    return make_error("the plan's programs run " + std::to_string(shape->microbatches * file->routes) +
                      " microbatches on " + std::to_string(shape->stages) + " devices x " +
                      std::to_string(shape->chunks) + " chunks, but the plan has " +
                      std::to_string(plan.train.microbatches) + " on " +
                      std::to_string(plan.stages) + " x " + std::to_string(plan.chunks) +
                      "; give the plan the programs' shape, or programs of its own");
  if (steps <= 0) steps = shape->steps;
  auto made = schedule_from_file(*file, plan.replicas, steps, plan.programs_versions);
  if (!made) return made.err();
  if (made->lowered) return made;
  return lower_communication(std::move(*made));
}

status use_schedule_file(run_plan& plan, const schedule_file& file,
                         std::optional<version_mode> versions) {
  auto rule = file_versions(file, versions);
  if (!rule) return rule.err();
  auto shape = shape_of(file, plan.replicas);
  if (!shape) return shape.err();
  plan.programs = to_programs_text(file.rows, file.routes);  // the routes travel in the text
  plan.programs_versions = *rule;
  plan.schedule = *rule == version_mode::latest ? schedule_kind::pipedream : schedule_kind::gpipe;
  plan.stages = shape->stages;
  plan.chunks = shape->chunks;
  plan.train.microbatches = shape->microbatches * file.routes;  // the step's, both routes'
  return status::success();
}

std::string schedule_label(const run_plan& plan) {
  if (!plan.schedule) return "none";
  if (!plan.programs.empty()) return "custom";
  return std::string(schedule_name(*plan.schedule));
}

}  // namespace pipeworks
