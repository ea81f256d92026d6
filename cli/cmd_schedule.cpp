// `pipeworks schedule`: prints the programs of a built-in schedule or a schedule file, one per
// rank, as text (pipeworks' action text, which --schedule-file reads back) or as CSV in PyTorch's
// pipelining format, optionally lowered with SEND/RECV pairs; or, with --html, the simulated
// schedule as one self-contained page of the explorer (runtime/explorer.hpp).
#include <iostream>
#include <memory>
#include <new>
#include <string>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/schedule_flags.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/explorer.hpp"
#include "runtime/lower.hpp"
#include "runtime/pytorch_csv.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"

namespace pipeworks::cli {
namespace {

struct schedule_options : schedule_flags {
  bool csv = false, pytorch = false, lowered = false;
  int for_replica = 0, for_step = 0;
  std::string html;   // --html FILE: the explorer's page
  std::string costs;  // --costs costs.json, with --html
  std::string compare;  // --compare KIND, with --html: a second schedule on the same page
};

// --html: simulates the schedule (lowered; on --costs, or F=1 B=2 W=1 with free communication as
// `pipeworks simulate` does by default) and writes the explorer's page with the simulator's
// numbers.
result<std::string> simulated_page(const schedule_options& o, schedule s);

int write_html(const schedule_options& o, schedule s) {
  auto data = simulated_page(o, std::move(s));
  if (!data) return exit_failure;  // simulated_page said why
  if (!o.compare.empty()) {
    // The same flags with the other kind (params_of gives a V schedule its two chunks).
    schedule_options other = o;
    other.kind = o.compare;
    other.file.clear();
    auto parsed = parse_schedule_kind(o.compare);
    if (!parsed) throw CLI::ValidationError("--compare", parsed.message());
    const schedule_kind kind = checked_kind(other);
    auto made = make_schedule(kind, params_of(other));
    if (!made) throw CLI::ValidationError("--compare", made.message());
    auto second = simulated_page(other, std::move(*made));
    if (!second) return exit_failure;
    auto both = explorer_compare_json(*data, *second);
    if (!both) throw CLI::ValidationError("--compare", both.message());
    data = std::move(both);
  }
  if (status ok = write_text_atomic(o.html, explorer_html(*data)); !ok) {
    std::cerr << "pipeworks schedule: --html: cannot write " << o.html << ": " << ok.message()
              << "\n";
    return exit_failure;
  }
  return exit_ok;
}

// The explorer's data for one schedule, simulated on --costs; an error after printing why.
result<std::string> simulated_page(const schedule_options& o, schedule s) {
  if (!s.lowered) s = lower_communication(std::move(s));
  if (status ok = validate(s); !ok) {
    std::cerr << "pipeworks schedule: the schedule is invalid:\n" << ok.message() << "\n";
    return make_error("reported");
  }
  cost_model costs;
  if (!o.costs.empty()) {
    auto loaded = load_cost_model(o.costs);
    if (!loaded) throw CLI::ValidationError("--costs", loaded.message());
    costs = std::move(*loaded);
  }
  if (status ok = costs.check(s.virtual_stages, s.params.stages, s.params.replicas, s.route_stages());
      !ok)
    throw CLI::ValidationError("--costs", ok.message());
  auto sim = simulate(s, costs);
  if (!sim) {
    std::cerr << "pipeworks schedule: --html: " << sim.message() << "\n";
    return make_error("reported");
  }
  auto data = explorer_json(s, costs, *sim);
  if (!data) throw CLI::ValidationError("--html", data.message());
  return data;
}

// --pytorch: one pipeline for one optimizer step, as PyTorch's runtime loads it.
int print_pytorch(const schedule_options& o, const schedule& s) {
  const pytorch_form form = o.lowered ? pytorch_form::compute_comms : pytorch_form::compute_only;
  auto rows = pytorch_programs(s, form, o.for_replica, o.for_step);
  if (!rows) {
    const std::string& m = rows.message();
    if (m.rfind("replica ", 0) == 0) throw CLI::ValidationError("--for-replica", m);
    if (m.rfind("step ", 0) == 0) throw CLI::ValidationError("--for-step", m);
    throw CLI::ValidationError("--pytorch", m);  // a schedule without a flush, --steps > 1
  }
  std::cout << to_pytorch_csv(*rows);
  if (s.params.replicas > 1 || s.params.steps > 1)
    std::cerr << "pipeworks schedule: wrote replica " << o.for_replica << " of "
              << s.params.replicas << ", step " << o.for_step << " of " << s.params.steps
              << " (PyTorch's CSV holds one pipeline for one step; --for-replica and --for-step "
                 "pick the others)\n";
  return exit_ok;
}

// The text form's header: what the programs are, and where each virtual stage runs.
std::string header(const schedule_options& o, const schedule& s) {
  const schedule_params& sp = s.params;
  std::string placement = "virtual stage s on device s % p";
  bool modulo = true;
  for (int v = 0; v < s.virtual_stages; ++v) modulo = modulo && s.device_of[v] == v % sp.stages;
  if (!modulo) {
    placement = "virtual stages on devices";
    for (int v = 0; v < s.virtual_stages; ++v)
      placement += (v ? ", " : " ") + std::to_string(v) + "->" + std::to_string(s.device_of[v]);
  }
  const std::string name = o.file.empty() ? std::string(schedule_name(s.kind)) : "custom (" + o.file + ")";
  // Two routes: the step's m is both routes' microbatches; each numbers its own m/2 from 0.
  const std::string routes =
      s.routes > 1 ? ", routes: stages 0.." + std::to_string(s.route_stages() - 1) +
                         " from device 0 and " + std::to_string(s.route_stages()) + ".." +
                         std::to_string(s.virtual_stages - 1) + " from device " +
                         std::to_string(sp.stages - 1) + ", " + std::to_string(sp.microbatches) +
                         " microbatches each"
                   : "";
  return "# " + name + ": p=" + std::to_string(sp.stages) + " m=" +
         std::to_string(sp.microbatches * s.routes) + " v=" + std::to_string(sp.chunks) + " w=" +
         std::to_string(sp.replicas) + " steps=" + std::to_string(sp.steps) + ", " +
         std::to_string(s.ranks()) + " ranks (rank = replica * p + device, " + placement + ")" +
         routes + (s.lowered ? ", lowered" : "") + "\n";
}

// The schedule as --pytorch, --csv or the text form (header, version rule, one line per rank).
int print_schedule(const schedule_options& o, const schedule& s) {
  if (o.pytorch) return print_pytorch(o, s);  // --pytorch implies --csv
  if (o.csv) {
    if (s.routes > 1)
      throw CLI::ValidationError("--csv", "pipeworks' CSV has no line to say that the programs "
                                          "run two routes (dualpipe); print the text form, which "
                                          "--schedule-file reads back");
    std::cout << to_csv(s);
    return exit_ok;
  }
  std::cout << header(o, s) << "# versions: " << s.version_rule << "\n";
  if (s.routes > 1) std::cout << "# routes: " << s.routes << "\n";
  for (int r = 0; r < s.ranks(); ++r)
    std::cout << "rank " << r << ": " << to_string(s.programs[r]) << "\n";
  return exit_ok;
}

int run_schedule(const schedule_options& o) {
  if (!o.html.empty()) {
    if (o.csv || o.pytorch) throw CLI::ValidationError("--html", "cannot go with --csv or --pytorch");
    check_outputs({{o.html, "--html"}}, {{o.file, "--schedule-file"}, {o.costs, "--costs"}});
  }
  if (!o.file.empty()) {
    const schedule s = file_schedule(o, o.lowered || !o.html.empty());
    if (!o.html.empty()) return write_html(o, s);
    return print_schedule(o, s);
  }
  const schedule_kind kind = checked_kind(o);
  const schedule_params params = params_of(o);
  if (status fits = check_footprint(kind, params, !o.html.empty(), !o.html.empty()); !fits) {
    std::cerr << "pipeworks " << fits.message() << "\n";
    return exit_failure;
  }
  auto made = make_schedule(kind, params);
  if (!made) throw CLI::ValidationError(flags_text(o), made.message());
  if (!o.html.empty()) return write_html(o, std::move(*made));
  const schedule s = o.lowered ? lower_communication(std::move(*made)) : std::move(*made);
  if (status ok = validate(s); !ok) {
    std::cerr << "pipeworks schedule: the generated schedule is invalid (a bug):\n"
              << ok.message() << "\n";
    return exit_failure;
  }
  return print_schedule(o, s);
}

const bool registered = register_command(
    "schedule", "Print the per-rank action programs of a pipeline schedule",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<schedule_options>();
      add_schedule_flags(sub, *o);
      sub.add_flag("--csv", o->csv,
                   "print pipeworks' CSV: one row per rank of every replica (w * p rows), every "
                   "step, with REDUCE and STEP; the library's parse_csv reads it back, PyTorch "
                   "does not");
      CLI::Option* pytorch = sub.add_flag("--pytorch", o->pytorch,
                   "print CSV that PyTorch's _PipelineScheduleRuntime._load_csv loads: one "
                   "pipeline (p rows, replica --for-replica) for one optimizer step "
                   "(--for-step), microbatches 0..m-1, F/B/I/W only (format compute_only: "
                   "PyTorch adds SEND/RECV and REDUCE_GRAD itself); with --lowered, format "
                   "compute_comms: SEND/RECV and REDUCE_GRAD included. Data parallelism and the "
                   "optimizer step stay outside PyTorch's CSV. Schedules without a flush "
                   "(pipedream, 2bw, ...) only with --steps 1");
      sub.add_option("--for-replica", o->for_replica,
                     "with --pytorch: the replica whose pipeline to print (default 0)")
          ->check(CLI::NonNegativeNumber)
          ->needs(pytorch);
      sub.add_option("--for-step", o->for_step,
                     "with --pytorch: the optimizer step to print (default 0)")
          ->check(CLI::NonNegativeNumber)
          ->needs(pytorch);
      sub.add_flag("--lowered", o->lowered, "add SEND/RECV pairs between devices");
      CLI::Option* html = sub.add_option("--html", o->html,
                     "write the explorer: one self-contained HTML page (no network) of the "
                     "schedule simulated (with --costs, or F=1 B=2 W=1 and free communication), "
                     "each action's wait, version and rule, and a cursor over each rank's state");
      sub.add_option("--compare", o->compare,
                     "with --html: a second built-in schedule with the same flags, drawn below "
                     "the first on the same time axis (e.g. 1f1b against 2bw)")
          ->needs(html);
      sub.add_option("--costs", o->costs,
                     "with --html: costs.json (per-stage times and bytes, links, devices) for the "
                     "simulation, as simulate --costs takes it")
          ->needs(html);
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
