// plan_schedule: the one place a run plan's schedule is made, from its built-in kind or from the
// programs it carries (a schedule file's), for the checks, the lowering and the checkpoints.
#pragma once
#include <optional>
#include <string>

#include "base/result.hpp"
#include "runtime/run_plan.hpp"
#include "runtime/schedule.hpp"
#include "runtime/schedule_file.hpp"

namespace pipeworks {

// The plan's schedule over `steps` optimizer steps, lowered (with SEND/RECV) and not validated:
// the generator of plan.schedule, or plan.programs made by schedule_from_file with the plan's
// replicas and version rule. steps <= 0: the fewest a schedule is made of (1, or the steps a
// file with STEPs covers). An error for a plan without a schedule (none), and for programs whose
// devices, chunks or microbatches are not the plan's.
result<schedule> plan_schedule(const run_plan& plan, int steps);

// Makes the plan run a schedule file (runtime/schedule_file.hpp): its programs, its version rule
// (file_versions with `versions`) and the stand-in kind that rule implies, and its stages,
// chunks and microbatches (the plan's replicas are the file's pipeline copies). An error when
// the file does not make a layout or names a rule no file runs.
status use_schedule_file(run_plan& plan, const schedule_file& file,
                         std::optional<version_mode> versions = std::nullopt);

// The schedule's name for people and manifests: "none", "custom" (from a file) or the kind's.
std::string schedule_label(const run_plan& plan);

}  // namespace pipeworks
