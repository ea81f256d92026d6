// The simulator's speed: simulated actions per second over schedules and sizes, the time of a
// p=1024, m=4096 1F1B simulation, and the validator's time against the action count.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"

using namespace pipeworks;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

schedule make(schedule_kind kind, int p, int m, int v = 1, int steps = 1) {
  schedule_params sp;
  sp.stages = p;
  sp.microbatches = m;
  sp.chunks = v;
  sp.steps = steps;
  return lower_communication(make_schedule(kind, sp).value());
}

// Best of `reps` runs of f, in seconds.
template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

struct row {
  schedule_kind kind;
  int p, m, v;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulator benchmark: simulated actions per second, a p=1024 m=4096 1F1B, validator scaling"};
  int reps = 3;
  bool quick = false;
  app.add_option("--reps", reps, "repetitions per measurement (best is reported)")->capture_default_str();
  app.add_flag("--quick", quick, "smaller sizes only (skips p=1024 m=4096)");
  CLI11_PARSE(app, argc, argv);

  const cost_model costs = uniform_costs(1.0, 2.0, 1.0);
  simulate_options no_trace;
  no_trace.record_timeline = false;

  std::printf("## Simulated actions per second (lowered programs, free communication, no timeline)\n\n");
  std::printf("| schedule | p | m | v | actions | simulate (ms) | actions/s | with timeline (ms) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<row> rows = {
      {schedule_kind::one_f_one_b, 8, 64, 1},   {schedule_kind::gpipe, 8, 64, 1},
      {schedule_kind::interleaved, 8, 64, 4},   {schedule_kind::zb_h2, 8, 64, 1},
      {schedule_kind::one_f_one_b, 64, 512, 1}, {schedule_kind::zb_h1, 64, 512, 1},
      {schedule_kind::interleaved, 64, 512, 2}, {schedule_kind::one_f_one_b, 256, 1024, 1},
  };
  if (quick) rows.resize(5);
  for (const row& r : rows) {
    const schedule s = make(r.kind, r.p, r.m, r.v);
    std::int64_t actions = 0;
    const double t = best_of(reps, [&] { actions = simulate(s, costs, no_trace).value().actions; });
    const double tt = best_of(std::max(1, reps / 2), [&] { (void)simulate(s, costs).value(); });
    std::printf("| %s | %d | %d | %d | %lld | %.2f | %.1f M | %.2f |\n", std::string(schedule_name(r.kind)).c_str(),
                r.p, r.m, r.v, static_cast<long long>(actions), 1e3 * t, actions / t / 1e6, 1e3 * tt);
    std::fflush(stdout);
  }

  if (!quick) {
    std::printf("\n## 1F1B, p=1024, m=4096\n\n");
    double t0 = now();
    const schedule s = make(schedule_kind::one_f_one_b, 1024, 4096);
    const double gen = now() - t0;
    std::int64_t actions = 0;
    double makespan = 0.0;
    auto once = [&] {
      auto sim = simulate(s, costs, no_trace).value();
      actions = sim.actions;
      makespan = sim.makespan;
    };
    const double first = best_of(1, once);
    const double best = std::min(first, best_of(std::max(1, reps - 1), once));
    std::printf("| actions | generate + lower (s) | simulate, first run (s) | best of %d (s) | actions/s (best) |"
                " makespan (F=1, B=2) |\n", std::max(2, reps));
    std::printf("|---:|---:|---:|---:|---:|---:|\n");
    std::printf("| %lld | %.2f | %.3f | %.3f | %.1f M | %.0f (expected %d) |\n", static_cast<long long>(actions), gen,
                first, best, actions / best / 1e6, makespan, (4096 + 1024 - 1) * 3);
    std::fflush(stdout);
  }

  std::printf("\n## Validator time against action count (lowered 1F1B, p=64)\n\n");
  std::printf("| m | actions | validate (ms) | ns/action |\n|---:|---:|---:|---:|\n");
  for (int m : quick ? std::vector<int>{64, 256, 1024} : std::vector<int>{64, 256, 1024, 4096}) {
    const schedule s = make(schedule_kind::one_f_one_b, 64, m);
    std::int64_t actions = 0;
    for (const auto& prog : s.programs) actions += static_cast<std::int64_t>(prog.size());
    const double t = best_of(reps, [&] {
      if (status ok = validate(s); !ok) std::printf("validate failed: %s\n", ok.message().c_str());
    });
    std::printf("| %d | %lld | %.2f | %.1f |\n", m, static_cast<long long>(actions), 1e3 * t, 1e9 * t / actions);
    std::fflush(stdout);
  }
  return 0;
}
