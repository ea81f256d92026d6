// `pipeworks schedule`: prints the programs of a built-in schedule, one per rank, as text or as
// CSV in PyTorch's pipelining format, optionally lowered with SEND/RECV pairs.
#include <iostream>
#include <memory>
#include <new>
#include <string>

#include "cli/command.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"

namespace pipeworks::cli {
namespace {

struct schedule_options {
  std::string kind;
  int stages = 0, microbatches = 0, chunks = 1, replicas = 1, steps = 1;
  bool csv = false, pytorch = false, lowered = false;
};

// "--flag: must be an integer of at least 1, got '0'", raised as a usage error (exit 2).
void require_at_least_one(const char* flag, int value) {
  if (value < 1)
    throw CLI::ValidationError(flag, "must be at least 1, got " + std::to_string(value));
}

// Every schedule flag, as given: the prefix of a generator's error.
std::string schedule_flags(const schedule_options& o) {
  return "--schedule " + o.kind + " --stages " + std::to_string(o.stages) + " --microbatches " +
         std::to_string(o.microbatches) + " --chunks " + std::to_string(o.chunks) +
         " --replicas " + std::to_string(o.replicas) + " --steps " + std::to_string(o.steps);
}

int run_schedule(const schedule_options& o) {
  auto kind = parse_schedule_kind(o.kind);
  if (!kind) throw CLI::ValidationError("--schedule", kind.message());
  require_at_least_one("--stages", o.stages);
  require_at_least_one("--microbatches", o.microbatches);
  require_at_least_one("--chunks", o.chunks);
  require_at_least_one("--replicas", o.replicas);
  require_at_least_one("--steps", o.steps);
  const schedule_params params{o.stages, o.microbatches, o.chunks, o.replicas, o.steps};
  if (status fits = check_footprint(*kind, params, false, false); !fits) {
    std::cerr << "pipeworks " << fits.message() << "\n";
    return exit_failure;
  }
  auto made = make_schedule(*kind, params);
  if (!made) throw CLI::ValidationError(schedule_flags(o), made.message());
  const schedule s = o.lowered ? lower_communication(std::move(*made)) : std::move(*made);
  if (status ok = validate(s); !ok) {
    std::cerr << "pipeworks schedule: the generated schedule is invalid (a bug):\n"
              << ok.message() << "\n";
    return exit_failure;
  }
  if (o.csv || o.pytorch) {  // --pytorch implies --csv
    std::cout << (o.pytorch ? to_pytorch_csv(s.programs) : to_csv(s));
    return exit_ok;
  }
  std::cout << "# " << schedule_name(s.kind) << ": p=" << o.stages << " m=" << o.microbatches
            << " v=" << o.chunks << " w=" << o.replicas << " steps=" << o.steps << ", "
            << s.ranks() << " ranks (rank = replica * p + device, virtual stage s on device s % p)"
            << (o.lowered ? ", lowered" : "") << "\n"
            << "# versions: " << s.version_rule << "\n";
  for (int r = 0; r < s.ranks(); ++r)
    std::cout << "rank " << r << ": " << to_string(s.programs[r]) << "\n";
  return exit_ok;
}

const bool registered = register_command(
    "schedule", "Print the per-rank action programs of a pipeline schedule",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<schedule_options>();
      sub.add_option("--schedule", o->kind,
                     "gpipe, 1f1b, interleaved, zb-h1, zb-h2, bfs, pipedream, pipedream-vs, 2bw "
                     "or cyclic")
          ->required();
      sub.add_option("--stages", o->stages, "p: devices in one pipeline")->required();
      sub.add_option("--microbatches", o->microbatches, "m: microbatches per step, per replica")
          ->required();
      sub.add_option("--chunks", o->chunks, "v: virtual stages per device (interleaved, bfs)")
          ->capture_default_str();
      sub.add_option("--replicas", o->replicas, "w: data-parallel replicas of every stage")
          ->capture_default_str();
      sub.add_option("--steps", o->steps, "optimizer steps the programs cover")
          ->capture_default_str();
      sub.add_flag("--csv", o->csv, "print CSV, one row per rank (PyTorch's _dump_csv format)");
      sub.add_flag("--pytorch", o->pytorch,
                   "print CSV for PyTorch's _load_csv (implies --csv): leave out STEP and write "
                   "REDUCE as REDUCE_GRAD");
      sub.add_flag("--lowered", o->lowered, "add SEND/RECV pairs between devices");
      return [o] {
        try {
          return run_schedule(*o);
        } catch (const std::bad_alloc&) {
          std::cerr << "pipeworks schedule: out of memory for " << schedule_flags(*o)
                    << "; use fewer stages, microbatches, replicas or steps\n";
          return exit_failure;
        }
      };
    });

}  // namespace
}  // namespace pipeworks::cli
