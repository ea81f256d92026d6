// The schedule-picking flags shared by `pipeworks schedule` and `pipeworks simulate`.
#include "cli/schedule_flags.hpp"

#include "base/input_file.hpp"
#include "runtime/schedule_file.hpp"
#include "runtime/validate.hpp"

namespace pipeworks::cli {

void add_schedule_flags(CLI::App& sub, schedule_flags& f) {
  sub.add_option("--schedule", f.kind,
                 "gpipe, 1f1b, interleaved, zb-h1, zb-h2, bfs, zbv, v-half, v-min, dualpipev, "
                 "dualpipe, pipedream, pipedream-vs, 2bw or cyclic (or --schedule-file)");
  f.stages_flag = sub.add_option("--stages", f.stages, "p: devices in one pipeline (with "
                                                       "--schedule-file: the file's rows)");
  f.microbatches_flag = sub.add_option("--microbatches", f.microbatches,
                                       "m: microbatches per step, per replica (dualpipe: half "
                                       "from each end)");
  f.chunks_flag = sub.add_option("--chunks", f.chunks,
                                 "v: virtual stages per device (interleaved, bfs; 2 for zbv, "
                                 "v-half, v-min, dualpipev and dualpipe)")
                      ->capture_default_str();
  sub.add_option("--replicas", f.replicas, "w: data-parallel replicas of every stage")
      ->capture_default_str();
  f.steps_flag = sub.add_option("--steps", f.steps, "optimizer steps the programs cover")
                     ->capture_default_str();
  sub.add_option("--reduce", f.reduce,
                 "collective (REDUCE is an all-reduce every replica reaches) or p2p (cyclic's "
                 "chain of partial sums from one replica to the next; the last one updates and "
                 "sends the new version on)")
      ->check(CLI::IsMember({"collective", "p2p"}))
      ->capture_default_str();
  CLI::Option* file =
      sub.add_option("--schedule-file", f.file,
                     "the schedule from a file instead of --schedule: PyTorch pipelining's CSV "
                     "(compute_only or compute_comms, one pipeline for one step, repeated for "
                     "every step with REDUCE and STEP added) or pipeworks' action text (one rank "
                     "per line, as `pipeworks schedule` prints it); see docs/formats.md");
  sub.add_option("--schedule-versions", f.versions,
                 "with --schedule-file: sync (step t uses version t; the default without STEPs "
                 "in the file) or latest (each F the newest version; the default for action "
                 "text with STEPs); overrides the file's \"# versions:\" line")
      ->check(CLI::IsMember({"sync", "latest"}))
      ->needs(file);
}

namespace {
void require_at_least_one(const char* flag, int value) {
  if (value < 1)
    throw CLI::ValidationError(flag, "must be at least 1, got " + std::to_string(value));
}
}  // namespace

schedule_kind checked_kind(const schedule_flags& f) {
  if (f.kind.empty()) throw CLI::ValidationError("--schedule", "is required (or --schedule-file)");
  auto given = [](const CLI::Option* o) { return o && o->count() > 0; };
  if (f.stages == 0 && !given(f.stages_flag))
    throw CLI::ValidationError("--stages", "is required with --schedule");
  if (f.microbatches == 0 && !given(f.microbatches_flag))
    throw CLI::ValidationError("--microbatches", "is required with --schedule");
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
  // A V schedule (and dualpipe) holds two virtual stages per device unless --chunks says otherwise.
  auto kind = parse_schedule_kind(f.kind);
  const bool v_default =
      kind && default_chunks(*kind) == 2 && f.chunks_flag && f.chunks_flag->count() == 0;
  return {f.stages, f.microbatches, v_default ? default_chunks(*kind) : f.chunks, f.replicas,
          f.steps, f.reduce == "p2p" ? reduce_mode::p2p : reduce_mode::collective};
}

schedule file_schedule(const schedule_flags& f, bool lower) {
  if (!f.kind.empty())
    throw CLI::ValidationError("--schedule-file", "and --schedule both name a schedule: drop one");
  require_at_least_one("--replicas", f.replicas);
  require_at_least_one("--steps", f.steps);
  if (f.reduce == "p2p")
    throw CLI::ValidationError("--reduce", "p2p is cyclic's chain of partial sums (--schedule "
                                           "cyclic); a schedule file's REDUCEs are collective: "
                                           "drop --reduce");
  auto text = read_input_text(f.file, std::uint64_t{256} << 20, "schedule file");
  if (!text) throw CLI::ValidationError("--schedule-file", text.message());
  auto file = parse_schedule_file(*text);
  if (!file) throw CLI::ValidationError("--schedule-file", f.file + ": " + file.message());
  auto shape = shape_of(*file, f.replicas);
  if (!shape) throw CLI::ValidationError("--schedule-file", f.file + ": " + shape.message());
  auto same = [&](const char* flag, int given, int in_file, const char* what) {
    if (given != in_file)
      throw CLI::ValidationError(flag, std::to_string(given) + ", but " + f.file + " has " +
                                           std::to_string(in_file) + " " + what +
                                           "; drop the flag or give " + std::to_string(in_file));
  };
  if (f.stages != 0) same("--stages", f.stages, shape->stages, "devices");
  if (f.microbatches != 0)
    same("--microbatches", f.microbatches, shape->microbatches, "microbatches per step");
  if (f.chunks_flag && f.chunks_flag->count() > 0)
    same("--chunks", f.chunks, shape->chunks, "virtual stages per device");
  const int steps = f.steps_flag && f.steps_flag->count() > 0 ? f.steps : shape->steps;
  std::optional<version_mode> versions;
  if (!f.versions.empty()) versions = parse_version_mode(f.versions).value();  // checked
  auto made = schedule_from_file(*file, f.replicas, steps, versions);
  if (!made) throw CLI::ValidationError("--schedule-file", f.file + ": " + made.message());
  schedule s = lower && !made->lowered ? lower_communication(*made) : std::move(*made);
  if (status ok = validate(s); !ok)
    throw CLI::ValidationError("--schedule-file", f.file + " (" +
                                                      std::string(schedule_file_format_name(file->format)) +
                                                      ") is not a valid schedule: " + ok.message());
  return s;
}

std::string flags_text(const schedule_flags& f) {
  if (!f.file.empty())
    return "--schedule-file " + f.file + " --replicas " + std::to_string(f.replicas) +
           " --steps " + std::to_string(f.steps);
  return "--schedule " + f.kind + " --stages " + std::to_string(f.stages) + " --microbatches " +
         std::to_string(f.microbatches) + " --chunks " + std::to_string(f.chunks) +
         " --replicas " + std::to_string(f.replicas) + " --steps " + std::to_string(f.steps) +
         (f.reduce == "p2p" ? " --reduce p2p" : "");
}

}  // namespace pipeworks::cli
