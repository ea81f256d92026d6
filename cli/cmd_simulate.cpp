// `pipeworks simulate`: generates a schedule, lowers it, runs the discrete-event simulator on a
// cost model (flags or costs.json) and prints the makespan, bubble and per-stage peaks, as a
// table or JSON, with optional Chrome trace, SVG and text timelines; or, with --every-schedule,
// the table of every built-in schedule side by side (cli/simulate_every.cpp).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/schedule_flags.hpp"
#include "cli/simulate_every.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/trace_chrome.hpp"
#include "runtime/trace_svg.hpp"
#include "runtime/trace_text.hpp"

namespace pipeworks::cli {
namespace {

constexpr int min_text_width = 10;  // --width; the most is the library's max_text_width

struct simulate_flags : schedule_flags {
  std::string costs, trace, svg;
  int width = 100;
  std::optional<double> fwd, bwd, wgrad;  // unset: the cost file's or the default times
  bool json = false, text = false;
  bool every = false;  // --every-schedule
};

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

void require_time(const char* flag, const std::optional<double>& value) {
  if (value && !(std::isfinite(*value) && *value >= 0.0))
    throw CLI::ValidationError(flag, "must be a finite time >= 0, got " + num(*value));
}

// The cost model: costs.json if given, else F=1, B=2, W=B/2; then --fwd/--bwd/--wgrad for every
// stage.
cost_model make_costs(const simulate_flags& o) {
  cost_model c;
  if (!o.costs.empty()) {
    auto loaded = load_cost_model(o.costs);
    if (!loaded) throw CLI::ValidationError("--costs", loaded.message());
    c = *loaded;
  } else if (o.bwd) {
    c.stages[0].weight_grad = *o.bwd / 2.0;
  }
  for (stage_cost& s : c.stages) {
    if (o.fwd) s.forward = *o.fwd;
    if (o.bwd) s.backward = *o.bwd;
    if (o.wgrad) s.weight_grad = *o.wgrad;
    if (s.weight_grad > s.backward) {
      throw CLI::ValidationError(
          o.wgrad ? "--wgrad" : "--bwd",
          "the weight gradient W=" + num(s.weight_grad) + " exceeds the backward B=" +
              num(s.backward) + "; W is part of B (I = B - W), so give --wgrad <= --bwd");
    }
  }
  return c;
}


void print_table(const simulation& sim, const std::string& title) {
  std::printf("%s\n", title.c_str());
  std::printf("makespan %.6g, bubble fraction %.4f (%.1f%% of device time idle), %lld actions\n",
              sim.makespan, sim.bubble_fraction, 100.0 * sim.bubble_fraction,
              static_cast<long long>(sim.actions));
  std::printf("%-6s %12s %7s %14s %14s %14s\n", "stage", "busy", "idle", "peak inflight",
              "peak versions", "peak act bytes");
  for (std::size_t d = 0; d < sim.stages.size(); ++d) {
    const rank_stats& s = sim.stages[d];
    const double idle = sim.makespan > 0 ? 1.0 - s.busy / sim.makespan : 0.0;
    std::printf("%-6zu %12.6g %6.1f%% %14d %14d %14lld\n", d, s.busy, 100.0 * idle,
                s.peak_inflight, s.peak_versions, static_cast<long long>(s.peak_activation_bytes));
  }
}

// --every-schedule: the comparison table at --stages and --microbatches. It picks each schedule's
// chunks, steps and costs itself, so the flags that would set them are refused.
int run_every_schedule(const simulate_flags& o) {
  auto refuse = [](const char* flag) {
    throw CLI::ValidationError(
        flag, "cannot go with --every-schedule, which simulates every schedule with its own "
              "chunks, steps and equal costs; drop " + std::string(flag) +
                  ", or simulate one schedule with --schedule");
  };
  if (!o.kind.empty()) refuse("--schedule");
  if (!o.file.empty()) refuse("--schedule-file");
  if (o.chunks_flag && o.chunks_flag->count() > 0) refuse("--chunks");
  if (o.steps_flag && o.steps_flag->count() > 0) refuse("--steps");
  if (o.replicas != 1) refuse("--replicas");
  if (!o.costs.empty()) refuse("--costs");
  if (o.fwd) refuse("--fwd");
  if (o.bwd) refuse("--bwd");
  if (o.wgrad) refuse("--wgrad");
  if (o.json) refuse("--json");
  if (!o.trace.empty()) refuse("--trace");
  if (!o.svg.empty()) refuse("--svg");
  if (o.text) refuse("--text");
  for (auto [flag, value] : {std::pair{"--stages", o.stages}, {"--microbatches", o.microbatches}}) {
    if (value == 0) throw CLI::ValidationError(flag, "is required with --every-schedule");
    if (value < 0)
      throw CLI::ValidationError(flag, "must be at least 1, got " + std::to_string(value));
  }
  auto table = every_schedule_table(o.stages, o.microbatches);
  if (!table) {
    std::cerr << "pipeworks " << table.message() << "\n";
    return exit_failure;
  }
  std::cout << *table;
  return exit_ok;
}

int run_simulate(const simulate_flags& o) {
  if (o.every) return run_every_schedule(o);
  const bool from_file = !o.file.empty();
  const schedule_kind kind = from_file ? schedule_kind::gpipe : checked_kind(o);
  if (o.width < min_text_width || o.width > max_text_width) {
    throw CLI::ValidationError("--width", "must be " + std::to_string(min_text_width) + ".." +
                                              std::to_string(max_text_width) + " columns, got " +
                                              std::to_string(o.width));
  }
  require_time("--fwd", o.fwd);
  require_time("--bwd", o.bwd);
  require_time("--wgrad", o.wgrad);
  check_outputs({{o.trace, "--trace"}, {o.svg, "--svg"}},
                {{o.costs, "--costs"}, {o.file, "--schedule-file"}});
  const schedule_params params = params_of(o);
  pipeworks::simulate_options sopt;
  sopt.record_timeline = o.text || !o.trace.empty() || !o.svg.empty();
  if (!from_file)
    if (status fits = check_footprint(kind, params, true, sopt.record_timeline); !fits) {
      std::cerr << "pipeworks " << fits.message() << "\n";
      return exit_failure;
    }
  // --schedule-file: read, lowered and validated (a usage error naming the file when not valid).
  schedule lowered;
  if (from_file) {
    lowered = file_schedule(o, true);
  } else {
    auto made = make_schedule(kind, params);
    if (!made) throw CLI::ValidationError(flags_text(o), made.message());
    lowered = lower_communication(std::move(*made));
  }
  const schedule_params& sp = lowered.params;
  const cost_model costs = make_costs(o);
  if (status ok = costs.check(lowered.virtual_stages, sp.stages, sp.replicas, lowered.route_stages());
      !ok) {
    throw CLI::ValidationError("--costs", ok.message());
  }

  auto sim = simulate(lowered, costs, sopt);
  if (!sim) {
    const std::string& m = sim.message();  // the library's messages start with "simulate: "
    std::cerr << "pipeworks " << (m.rfind("simulate: ", 0) == 0 ? m : "simulate: " + m) << "\n";
    return exit_failure;
  }
  std::optional<std::string> json;
  if (o.json) {
    auto j = to_json(*sim);
    if (!j) {
      std::cerr << "pipeworks " << j.message() << "\n";
      return exit_failure;
    }
    json = std::move(*j);
  }
  if (!o.trace.empty()) {
    if (status ok = write_chrome_trace(sim->trace, o.trace); !ok) {
      std::cerr << "pipeworks simulate: --trace: " << ok.message() << "\n";
      return exit_failure;
    }
  }
  if (!o.svg.empty())
    if (status ok = write_text_atomic(o.svg, to_svg(sim->trace)); !ok) {
      std::cerr << "pipeworks simulate: --svg: " << ok.message() << "\n";
      return exit_failure;
    }
  if (o.text) (o.json ? std::cerr : std::cout) << to_text(sim->trace, o.width);
  if (json) {
    std::cout << *json << "\n";
  } else {
    const std::string name = from_file ? "custom (" + o.file + ")" : std::string(schedule_name(kind));
    const std::string title = name + " p=" + std::to_string(sp.stages) + " m=" +
                              std::to_string(sp.microbatches * lowered.routes) + " v=" +
                              std::to_string(sp.chunks) +
                              " w=" + std::to_string(sp.replicas) + " steps=" +
                              std::to_string(sp.steps) + " (simulated)";
    print_table(*sim, title);
  }
  return exit_ok;
}

// An allocation that fails despite the up-front estimate ends the command with a message.
int run_simulate_guarded(const simulate_flags& o) {
  try {
    return run_simulate(o);
  } catch (const std::bad_alloc&) {
    std::cerr << "pipeworks simulate: out of memory for " << flags_text(o)
              << "; use fewer stages, microbatches, replicas or steps, or drop --trace, --svg "
                 "and --text (the timeline takes about 56 bytes an action)\n";
    return exit_failure;
  }
}

// A time flag: std::optional, set only when given (CLI11 parses "nan" and "inf" too; run_simulate
// rejects them).
void add_time(CLI::App& sub, const char* flag, std::optional<double>& out, const char* help) {
  sub.add_option_function<double>(flag, [&out](const double& x) { out = x; }, help);
}

const bool registered = register_command(
    "simulate",
    "Simulate a pipeline schedule on a cost model: makespan, bubble, memory and version peaks",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<simulate_flags>();
      add_schedule_flags(sub, *o);
      add_time(sub, "--fwd", o->fwd, "F: forward time of every virtual stage (default 1)");
      add_time(sub, "--bwd", o->bwd, "B: full backward time of every virtual stage (default 2)");
      add_time(sub, "--wgrad", o->wgrad,
               "W: weight-gradient part of B, so I = B - W (default B/2)");
      sub.add_option("--costs", o->costs,
                     "costs.json: per-stage times and bytes, links, devices; "
                     "--fwd/--bwd/--wgrad override its times");
      sub.add_flag("--json", o->json,
                   "print {\"makespan\", \"bubble_fraction\", \"stages\": [...]} as JSON");
      sub.add_option("--trace", o->trace, "write a Chrome trace-event JSON file (Perfetto)");
      sub.add_option("--svg", o->svg, "write an SVG timeline");
      sub.add_flag("--every-schedule", o->every,
                   "simulate every built-in schedule at --stages and --microbatches with equal "
                   "work per microbatch and print a Markdown table: bubble, peak activations and "
                   "peak parameter copies per device (see docs/schedules.md)");
      sub.add_flag("--text", o->text, "print a text timeline (to stderr with --json)");
      sub.add_option("--width", o->width,
                     "columns of the text timeline, " + std::to_string(min_text_width) + ".." +
                         std::to_string(max_text_width))
          ->capture_default_str();
      return [o] { return run_simulate_guarded(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
