// The schedule-picking flags shared by `pipeworks schedule` and `pipeworks simulate`.
#include "cli/schedule_flags.hpp"

namespace pipeworks::cli {

void add_schedule_flags(CLI::App& sub, schedule_flags& f) {
  sub.add_option("--schedule", f.kind,
                 "gpipe, 1f1b, interleaved, zb-h1, zb-h2, bfs, pipedream, pipedream-vs, 2bw "
                 "or cyclic")
      ->required();
  sub.add_option("--stages", f.stages, "p: devices in one pipeline")->required();
  sub.add_option("--microbatches", f.microbatches, "m: microbatches per step, per replica")
      ->required();
  sub.add_option("--chunks", f.chunks, "v: virtual stages per device (interleaved, bfs)")
      ->capture_default_str();
  sub.add_option("--replicas", f.replicas, "w: data-parallel replicas of every stage")
      ->capture_default_str();
  sub.add_option("--steps", f.steps, "optimizer steps the programs cover")->capture_default_str();
}

namespace {
void require_at_least_one(const char* flag, int value) {
  if (value < 1)
    throw CLI::ValidationError(flag, "must be at least 1, got " + std::to_string(value));
}
}  // namespace

schedule_kind checked_kind(const schedule_flags& f) {
  auto kind = parse_schedule_kind(f.kind);
  if (!kind) throw CLI::ValidationError("--schedule", kind.message());
  require_at_least_one("--stages", f.stages);
  require_at_least_one("--microbatches", f.microbatches);
  require_at_least_one("--chunks", f.chunks);
  require_at_least_one("--replicas", f.replicas);
  require_at_least_one("--steps", f.steps);
  return *kind;
}

schedule_params params_of(const schedule_flags& f) {
  return {f.stages, f.microbatches, f.chunks, f.replicas, f.steps};
}

std::string flags_text(const schedule_flags& f) {
  return "--schedule " + f.kind + " --stages " + std::to_string(f.stages) + " --microbatches " +
         std::to_string(f.microbatches) + " --chunks " + std::to_string(f.chunks) +
         " --replicas " + std::to_string(f.replicas) + " --steps " + std::to_string(f.steps);
}

}  // namespace pipeworks::cli
