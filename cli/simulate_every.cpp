// Simulates every built-in schedule at one p and m and formats the comparison table that
// `pipeworks simulate --every-schedule` prints and docs/schedules.md shows.
#include "cli/simulate_every.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/cost_model.hpp"
#include "runtime/lower.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"

namespace pipeworks::cli {
namespace {

// Peaks are taken over this many steps; the steady step is the last one, checked against the one
// before it.
constexpr int steady_steps = 4;
// One stage's activations for one microbatch, and one stage's parameters: the tables' units.
constexpr std::int64_t stage_bytes = std::int64_t{1} << 20;

// The looped schedules run 2 chunks, as the V schedules do, so each is compared at its usual shape.
int table_chunks(schedule_kind k) {
  return k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
}

// A stage's F = I = W = 1 (so B = 2); a chunk is 1/v of a stage and takes 1/v of each. Stashed
// activations or parameters (one of the two, so that each peak is its own) in the same proportion.
cost_model table_costs(int v, bool parameters) {
  cost_model c = uniform_costs(1.0 / v, 2.0 / v, 1.0 / v);
  (parameters ? c.stages[0].param_bytes : c.stages[0].activation_bytes) = stage_bytes / v;
  return c;
}

struct row {
  schedule_kind kind;
  int chunks = 1;
  double one_step = 0.0;  // makespan of one step from an idle pipeline
  double steady = 0.0;    // what the last of steady_steps steps adds to the makespan
  bool settled = true;    // the step before the last added as much
  double activations = 0.0, parameters = 0.0;  // peaks, in stage units, on the device with most
};

std::string fixed(const char* format, double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// Idle time as a fraction of `span`, and relative to 1F1B's idle time (a dash when 1F1B has none).
std::string bubble_cells(double span, double idle, double one_f_one_b_idle) {
  const std::string fraction = fixed("%.2f%%", span > 0.0 ? 100.0 * idle / span : 0.0);
  const std::string relative =
      one_f_one_b_idle > 1e-9 ? fixed("%.3f", idle / one_f_one_b_idle) : "-";
  return fraction + " | " + relative;
}

result<simulation> run(schedule_kind kind, const schedule_params& params, bool parameters) {
  if (status fits = check_footprint(kind, params, true, false); !fits)
    return make_error(std::string(schedule_name(kind)) + ": " + fits.message());
  auto made = make_schedule(kind, params);
  if (!made) return make_error(made.message());
  simulate_options options;
  options.record_timeline = false;
  // dualpipe's two chunks per device are whole stages, one per route (the model is cut in p).
  auto sim = simulate(lower_communication(std::move(*made)),
                      table_costs(params.chunks / default_routes(kind), parameters), options);
  if (!sim) return make_error(std::string(schedule_name(kind)) + ": " + sim.message());
  return sim;
}

}  // namespace

result<std::string> every_schedule_table(int stages, int microbatches) {
  if (stages < 1 || microbatches < 1)
    return make_error("every_schedule_table: p and m must be at least 1, got p=" +
                      std::to_string(stages) + " m=" + std::to_string(microbatches));
  const double work = 3.0 * microbatches;  // F + I + W of m microbatches on each device, a step
  std::vector<row> rows;
  std::vector<std::string> refused;
  for (schedule_kind kind : every_schedule_kind()) {
    const int v = table_chunks(kind);
    auto params = [&](int steps) { return schedule_params{stages, microbatches, v, 1, steps}; };
    // A generator that refuses p and m is noted, not an error: the table covers the rest.
    if (auto made = make_schedule(kind, params(1)); !made) {
      refused.push_back(std::string(schedule_name(kind)) + ": " + made.message());
      continue;
    }
    auto one = run(kind, params(1), false);
    auto earlier = run(kind, params(steady_steps - 2), false);
    auto before = run(kind, params(steady_steps - 1), false);
    auto last = run(kind, params(steady_steps), false);
    auto weights = run(kind, params(steady_steps), true);
    for (const auto* r : {&one, &earlier, &before, &last, &weights})
      if (!*r) return make_error("simulate --every-schedule: " + r->message());
    row x{kind, v};
    x.one_step = one->makespan;
    x.steady = last->makespan - before->makespan;
    x.settled = std::abs((before->makespan - earlier->makespan) - x.steady) <= 1e-9 * x.steady;
    for (const rank_stats& s : last->stages)
      x.activations = std::max(x.activations, double(s.peak_activation_bytes) / stage_bytes);
    for (const rank_stats& s : weights->stages)
      x.parameters = std::max(x.parameters, double(s.peak_memory_bytes) / stage_bytes);
    rows.push_back(x);
  }
  double ref_one = 0.0, ref_steady = 0.0;  // 1F1B's idle time per device
  for (const row& x : rows)
    if (x.kind == schedule_kind::one_f_one_b) {
      ref_one = x.one_step - work;
      ref_steady = x.steady - work;
    }

  std::string out = "Every schedule at p=" + std::to_string(stages) + " m=" +
                    std::to_string(microbatches) +
                    ", simulated: a stage's F = I = W = 1 (B = I + W = 2), a chunk of a "
                    "2-chunk schedule half a stage with F = I = W = 1/2 (dualpipe's two are whole "
                    "stages, one per direction, each with half the microbatches), so every "
                    "schedule does the same work per microbatch; free communication.\n\n";
  out += "| schedule | chunks | bubble, one step | idle vs 1F1B, one step | bubble, steady "
         "| idle vs 1F1B, steady | peak activations | peak parameters |\n";
  out += "|---|---|---|---|---|---|---|---|\n";
  for (const row& x : rows) {
    out += "| " + std::string(schedule_name(x.kind)) + " | " + std::to_string(x.chunks) + " | " +
           bubble_cells(x.one_step, x.one_step - work, ref_one) + " | " +
           bubble_cells(x.steady, x.steady - work, ref_steady) + " | " +
           fixed("%g", x.activations) + " | " + fixed("%g", x.parameters) + " |\n";
  }
  for (const std::string& r : refused) out += "\nNot simulated, " + r + "\n";
  for (const row& x : rows)
    if (!x.settled)
      out += "\nNot yet steady, " + std::string(schedule_name(x.kind)) + ": step " +
             std::to_string(steady_steps) + " adds another time than step " +
             std::to_string(steady_steps - 1) + " did; its steady columns are step " +
             std::to_string(steady_steps) + "'s\n";
  out += "\nBubble: idle device time as a fraction of the time taken; idle vs 1F1B: that idle "
         "time over 1F1B's at the same p and m. One step: a single step from an idle pipeline. "
         "Steady: what step " + std::to_string(steady_steps) + " adds to the makespan of " +
         std::to_string(steady_steps - 1) + ", where each stage steps as soon as its own last "
         "backward ends, so one step's drain overlaps the next one's fill (the published ZB-H2 "
         "and ZBV figures assume this; pipeworks' global gradient norm, `--clip`, joins the "
         "stages before STEP, which gives a flush schedule its one-step figure).\n";
  out += "\nPeak activations: the most stashed at once on the device that holds most, in "
         "units of one stage's activations for one microbatch (a chunk's are half). Peak "
         "parameters: the most live weight versions on one device, in units of one stage's "
         "parameters (a chunk's are half). Both over " + std::to_string(steady_steps) +
         " steps.\n";
  out += "\npipedream, pipedream-vs, 2bw and cyclic never flush: the next step's forwards "
         "follow the last ones without a drain, so their steady columns are the figures they "
         "run at, and their peak parameters are the versions kept live for stashed "
         "microbatches.\n";
  return out;
}

}  // namespace pipeworks::cli
