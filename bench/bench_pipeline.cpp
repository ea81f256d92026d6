// Benchmark: train_pipeline's actor runtime: µs per action with no-op blocks against a CAF
// ping-pong, and busy blocks' makespan against the simulator's. Prints a table, or --json.
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/pipeline.hpp"
#include "runtime/simulate.hpp"

using namespace pipeworks;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Which clock a busy block spins on: wall time (steady_clock), or this thread's CPU time, which
// a descheduled thread does not advance (so oversubscribed cores show up as longer compute).
enum class spin_clock { wall, cpu };

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void spin_for(double us, spin_clock c) {
  if (us <= 0) return;
  if (c == spin_clock::wall) {
    const auto until = clock_type::now() + std::chrono::nanoseconds(std::int64_t(us * 1e3));
    while (clock_type::now() < until) {
    }
  } else {
    const double until = thread_cpu_s() + us * 1e-6;
    while (thread_cpu_s() < until) {
    }
  }
}

// A block with one (1) parameter that spins forward_us in forward and backward_us in backward
// and hands on (1) tensors; the last block is the loss block and returns a loss of 1.
template <class T>
class spin_block final : public block<T> {
 public:
  spin_block(int index, bool first, bool loss, double forward_us, double backward_us, spin_clock c)
      : index_(index),
        first_(first),
        loss_(loss),
        fwd_us_(forward_us),
        bwd_us_(backward_us),
        clock_(c) {}

  std::string name() const override { return "spin." + std::to_string(index_); }
  std::vector<param_spec> params() const override {
    return {{"spin." + std::to_string(index_) + ".weight", {1}}};
  }
  void init(std::span<T> w, std::uint64_t) const override { std::fill(w.begin(), w.end(), T(1)); }
  block_forward forward(const device_context&, const T*, tensor,
                        const microbatch_ctx&) const override {
    spin_for(fwd_us_, clock_);
    tensor out({1}, dtype_of<T>());
    if (loss_) out.template data<T>()[0] = T(1);
    return {std::move(out), {}};
  }
  // The whole backward's time in its input half; the weight half adds nothing.
  tensor backward_input(const device_context&, const T*, stash, tensor, const microbatch_ctx&,
                        deferred_grads&) const override {
    spin_for(bwd_us_, clock_);
    return first_ ? tensor() : tensor({1}, dtype_of<T>());
  }
  void backward_weight(const device_context&, const T*, T* dw, deferred_grads) const override {
    dw[0] += T(0);
  }
  layer_cost cost() const override { return {sizeof(T), 0, sizeof(T), 1}; }
  bool is_loss() const override { return loss_; }

 private:
  int index_;
  bool first_, loss_;
  double fwd_us_, bwd_us_;
  spin_clock clock_;
};

// p blocks, one per stage; forward_us = 0 gives the no-op model.
model<float> spin_model(int p, double forward_us, spin_clock c) {
  std::vector<std::unique_ptr<const block<float>>> blocks;
  for (int i = 0; i < p; ++i)
    blocks.push_back(
        std::make_unique<spin_block<float>>(i, i == 0, i == p - 1, forward_us, 2 * forward_us, c));
  return model<float>("spin", std::move(blocks));
}

// One sample per microbatch: inputs (m, 1) f32, targets (m) i32.
minibatch tiny_batch(int m) { return {tensor({m, 1}, dtype::f32), tensor({m}, dtype::i32)}; }

struct pipeline_run {
  double wall_s = 0;         // train_pipeline, set-up included
  double steady_s = 0;       // from the first step's on_step to the last one's
  double trace_s = 0;        // the trace's last end minus first start (record_trace)
  double busy_s = 0;         // the busiest rank's compute time in the trace (F, B, STEP)
  std::int64_t actions = 0;  // in the lowered schedule, all steps
  std::int64_t busiest_actions = 0;  // the rank with the most actions, all steps
  int steps = 0;
  std::shared_ptr<const schedule> plan;  // lowered
};

result<pipeline_run> run_pipeline(int p, int m, int steps, bool detached, double forward_us,
                                  spin_clock c, bool trace) {
  model<float> net = spin_model(p, forward_us, c);
  run_plan o;
  o.schedule = schedule_kind::one_f_one_b;
  o.stages = p;
  o.train.microbatches = m;
  o.detached = detached;
  for (int s = 0; s < p; ++s) o.split.push_back(s);
  o.train.steps = steps;
  o.train.optim = default_optimizer_config(optimizer_kind::sgd);
  o.train.optim.lr = 1e-3;
  o.train.min_lr = 1e-3;
  o.train.clip_grad_norm = 0;  // the spin blocks' gradients carry no norm worth clipping
  o.data.batch = m;
  std::vector<clock_type::time_point> step_end;
  step_end.reserve(std::size_t(steps));
  auto data = [m](std::int64_t) -> result<minibatch> { return tiny_batch(m); };
  pipeline_callbacks cb;
  cb.on_step = [&](const step_metrics&) { step_end.push_back(clock_type::now()); };
  auto r = train_pipeline<float>(net, net.init_params(1), o, data, cb, {.record_trace = trace});
  if (!r) return r.err();
  pipeline_run out;
  out.wall_s = r->wall_s;
  out.steps = steps;
  out.plan = r->programs;
  for (const program& prog : r->programs->programs) {
    out.actions += std::int64_t(prog.size());
    out.busiest_actions = std::max(out.busiest_actions, std::int64_t(prog.size()));
  }
  if (step_end.size() >= 2)
    out.steady_s = std::chrono::duration<double>(step_end.back() - step_end.front()).count();
  if (!r->trace.events.empty()) {
    double first = r->trace.events.front().start;
    for (const auto& e : r->trace.events) first = std::min(first, e.start);
    out.trace_s = r->trace.makespan() - first;
    std::vector<double> busy(r->programs->programs.size(), 0.0);
    for (const auto& e : r->trace.events)
      if (e.stream == stream_kind::compute && !is_comm(e.act.kind))
        busy.at(std::size_t(e.rank)) += e.end - e.start;
    out.busy_s = *std::max_element(busy.begin(), busy.end());
  }
  return out;
}

// The baseline: two event-based actors bouncing an integer, n round trips.
using start_atom = caf::atom_constant<caf::atom("start")>;

caf::behavior pong(caf::event_based_actor* self) {
  return {[self](std::int64_t i) {
    self->send(caf::actor_cast<caf::actor>(self->current_sender()), i);
  }};
}

struct ping_state {
  caf::response_promise done;
  std::int64_t n = 0;
};

caf::behavior ping(caf::stateful_actor<ping_state>* self, caf::actor buddy) {
  return {
      [self, buddy](start_atom, std::int64_t n) {
        self->state.n = n;
        self->state.done = self->make_response_promise();
        self->send(buddy, std::int64_t{0});
      },
      [self, buddy](std::int64_t i) {
        if (i + 1 >= self->state.n)
          self->state.done.deliver(i + 1);
        else
          self->send(buddy, i + 1);
      },
  };
}

// µs per round trip, the best of `repeats` runs of n round trips, in an actor system with the
// scheduler threads train_pipeline uses here (2 on 2 cores either way).
double ping_pong_us(bool detached, std::int64_t n, int repeats, int scheduler_threads) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", scheduler_threads);
  caf::actor_system sys{cfg};
  caf::actor a, b;
  if (detached) {
    b = sys.spawn<caf::detached>(pong);
    a = sys.spawn<caf::detached>(ping, b);
  } else {
    b = sys.spawn(pong);
    a = sys.spawn(ping, b);
  }
  double best = 1e30;
  caf::scoped_actor self{sys};
  for (int rep = 0; rep <= repeats; ++rep) {  // the first run warms up
    auto t0 = clock_type::now();
    self->request(a, caf::infinite, start_atom::value, n)
        .receive(
            [](std::int64_t) {},
            [&](caf::error& e) { std::fprintf(stderr, "ping-pong: %s\n", sys.render(e).c_str()); });
    double us = 1e6 * seconds_since(t0) / double(n);
    if (rep > 0) best = std::min(best, us);
  }
  self->send_exit(a, caf::exit_reason::user_shutdown);
  self->send_exit(b, caf::exit_reason::user_shutdown);
  return best;
}

struct row {
  std::string measure;  // "overhead" | "efficiency"
  std::string actors;   // "detached" | "pooled"
  int p = 0;
  std::string clock;  // efficiency: "wall" | "cpu"
  std::string unit;
  double value = 0, baseline = 0, ratio = 0, target = 0;
  std::string baseline_name;
  std::int64_t actions_per_step = 0;
  // efficiency: the busiest rank's measured compute time over the simulator's. Near the ratio:
  // the compute itself ran long (load, oversubscribed cores); far below it: the runtime's gaps.
  double busy_ratio = 0;
};

// The 1-minute load average: other work on the cores makes every figure here noisy.
double load_average() {
  double l = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

const char* actors_name(bool detached) { return detached ? "detached" : "pooled"; }

int fail(const std::string& why) {
  std::fprintf(stderr, "bench_pipeline: %s\n", why.c_str());
  return 1;
}

// (a) No-op blocks: µs per action of the busiest rank (the ranks run at once, so this is the
// time an action takes along one rank's program) between the first step's end and the last
// one's, the best of `repeats` runs, against the ping-pong round trip rt.
result<row> overhead_row(int p, int m, int steps, bool detached, int repeats, double rt) {
  double best = 1e30;
  std::int64_t per_step = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    auto r = run_pipeline(p, m, steps, detached, 0.0, spin_clock::wall, false);
    if (!r) return r.err();
    per_step = r->busiest_actions / r->steps;
    best = std::min(best, 1e6 * r->steady_s / double(per_step * (r->steps - 1)));
  }
  return row{"overhead", actors_name(detached), p,       "", "us/action", best, rt, best / rt,
             3.0,        "us/round trip",       per_step};
}

// (b) F spins forward_ms, B 2F: the trace's makespan (the best of `repeats` runs) over the
// simulator's for the same lowered schedule with uniform_costs(F, 2F).
result<row> efficiency_row(int p, int m, int steps, bool detached, double forward_ms, spin_clock c,
                           int repeats) {
  const double F = forward_ms * 1e-3;
  double best = 1e30, best_busy = 0, sim = 0, sim_busy = 0;
  std::int64_t per_step = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    auto r = run_pipeline(p, m, steps, detached, forward_ms * 1e3, c, true);
    if (!r) return r.err();
    per_step = r->actions / r->steps;
    if (r->trace_s < best) {
      best = r->trace_s;
      best_busy = r->busy_s;
    }
    if (rep == 0) {
      simulate_options so;
      so.record_timeline = false;
      auto s = simulate(*r->plan, uniform_costs(F, 2 * F), so);
      if (!s) return s.err();
      sim = s->makespan;
      for (const rank_stats& rs : s->ranks) sim_busy = std::max(sim_busy, rs.busy);
    }
  }
  return row{"efficiency",
             actors_name(detached),
             p,
             c == spin_clock::wall ? "wall" : "cpu",
             "ms makespan",
             1e3 * best,
             1e3 * sim,
             best / sim,
             1.10,
             "ms simulated",
             per_step,
             best_busy / sim_busy};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_pipeline: the actor runtime's overhead per action and its efficiency"};
  int m = 8, overhead_steps = 200, efficiency_steps = 3, repeats = 3;
  std::int64_t round_trips = 20000;
  double forward_ms = 2.0;
  std::vector<int> stages{2, 4};
  bool json = false;
  app.add_option("--microbatches", m, "m: microbatches per step")->check(CLI::PositiveNumber);
  app.add_option("--stages", stages, "pipeline depths p to run")->check(CLI::Range(2, 64));
  app.add_option("--overhead-steps", overhead_steps, "steps of the no-op model")
      ->check(CLI::Range(2, 1000000));
  app.add_option("--efficiency-steps", efficiency_steps, "steps of the busy model")
      ->check(CLI::PositiveNumber);
  app.add_option("--forward-ms", forward_ms, "F of the busy model (B is 2F)")
      ->check(CLI::PositiveNumber);
  app.add_option("--round-trips", round_trips, "ping-pong round trips per run")
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "runs of each measurement; the best counts")
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  const double load_before = load_average();
  std::vector<row> rows;
  for (bool detached : {true, false}) {
    const double rt = ping_pong_us(detached, round_trips, repeats, 2);
    for (int p : stages) {
      auto r = overhead_row(p, m, overhead_steps, detached, repeats, rt);
      if (!r) return fail(r.message());
      rows.push_back(*r);
    }
  }
  for (spin_clock c : {spin_clock::wall, spin_clock::cpu})
    for (bool detached : {true, false})
      for (int p : stages) {
        auto r = efficiency_row(p, m, efficiency_steps, detached, forward_ms, c, repeats);
        if (!r) return fail(r.message());
        rows.push_back(*r);
      }
  const double load_after = load_average();

  if (json) {
    std::printf(
        "{\"schedule\": \"1f1b\", \"microbatches\": %d, \"overhead_steps\": %d, "
        "\"efficiency_steps\": %d, \"forward_ms\": %.3f, \"repeats\": %d, \"cores\": %u, "
        "\"load_before\": %.2f, \"load_after\": %.2f, \"rows\": [",
        m, overhead_steps, efficiency_steps, forward_ms, repeats,
        std::thread::hardware_concurrency(), load_before, load_after);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      std::printf(
          "%s{\"measure\": \"%s\", \"actors\": \"%s\", \"stages\": %d, \"clock\": \"%s\", "
          "\"unit\": \"%s\", \"value\": %.4f, \"baseline\": %.4f, \"baseline_unit\": "
          "\"%s\", \"ratio\": %.4f, \"target\": %.2f, \"actions_per_step\": %lld, "
          "\"busy_ratio\": %.4f}",
          i ? ", " : "", r.measure.c_str(), r.actors.c_str(), r.p, r.clock.c_str(), r.unit.c_str(),
          r.value, r.baseline, r.baseline_name.c_str(), r.ratio, r.target,
          static_cast<long long>(r.actions_per_step), r.busy_ratio);
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf(
      "train_pipeline, 1f1b, m=%d, best of %d; overhead: no-op blocks, %d steps, against "
      "a CAF ping-pong round trip; efficiency: F=%.1f ms, B=2F spin, %d steps, against "
      "the simulator\n",
      m, repeats, overhead_steps, forward_ms, efficiency_steps);
  std::printf(
      "| measure | actors | p | spin clock | actions/step | runtime | baseline | ratio "
      "| target | busiest compute / simulated |\n"
      "|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const row& r : rows) {
    char busy[32] = "-";
    if (r.busy_ratio > 0) std::snprintf(busy, sizeof busy, "%.2f", r.busy_ratio);
    std::printf("| %s | %s | %d | %s | %lld | %.2f %s | %.2f %s | %.2f | <= %.2f | %s |\n",
                r.measure.c_str(), r.actors.c_str(), r.p, r.clock.empty() ? "-" : r.clock.c_str(),
                static_cast<long long>(r.actions_per_step), r.value, r.unit.c_str(), r.baseline,
                r.baseline_name.c_str(), r.ratio, r.target, busy);
  }
  std::printf(
      "\nmachine load (1-minute average) %.2f before, %.2f after, on %u cores: other work on the "
      "cores makes every figure noisy. busiest compute / simulated near the ratio: the compute "
      "itself ran long (load, more stages than cores); well below it: the runtime left gaps.\n",
      load_before, load_after, std::thread::hardware_concurrency());
  return 0;
}
