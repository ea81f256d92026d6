// `pipeworks schedule`: prints the programs of a built-in schedule, one per rank, as text or as
// CSV in PyTorch's pipelining format, optionally lowered with SEND/RECV pairs.
#include <iostream>
#include <memory>
#include <new>
#include <string>

#include "cli/command.hpp"
#include "cli/schedule_flags.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"

namespace pipeworks::cli {
namespace {

struct schedule_options : schedule_flags {
  bool csv = false, pytorch = false, lowered = false;
};

int run_schedule(const schedule_options& o) {
  const schedule_kind kind = checked_kind(o);
  const schedule_params params = params_of(o);
  if (status fits = check_footprint(kind, params, false, false); !fits) {
    std::cerr << "pipeworks " << fits.message() << "\n";
    return exit_failure;
  }
  auto made = make_schedule(kind, params);
  if (!made) throw CLI::ValidationError(flags_text(o), made.message());
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
      add_schedule_flags(sub, *o);
      sub.add_flag("--csv", o->csv, "print CSV, one row per rank (PyTorch's _dump_csv format)");
      sub.add_flag("--pytorch", o->pytorch,
                   "print CSV for PyTorch's _load_csv (implies --csv): leave out STEP and write "
                   "REDUCE as REDUCE_GRAD");
      sub.add_flag("--lowered", o->lowered, "add SEND/RECV pairs between devices");
      return [o] {
        try {
          return run_schedule(*o);
        } catch (const std::bad_alloc&) {
          std::cerr << "pipeworks schedule: out of memory for " << flags_text(*o)
                    << "; use fewer stages, microbatches, replicas or steps\n";
          return exit_failure;
        }
      };
    });

}  // namespace
}  // namespace pipeworks::cli
