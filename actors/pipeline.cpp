// train_pipeline: checks the options, builds the lowered and validated schedule, starts a CAF
// actor system with the tracer, driver and partition actor, waits for the driver's outcome and
// shuts everything down. `--schedule none` runs the single-device trainer instead.
#include "actors/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "actors/driver.hpp"
#include "actors/messages.hpp"
#include "actors/partition_actor.hpp"
#include "actors/tracer_actor.hpp"
#include "partition/cpu_count.hpp"
#include "runtime/lower.hpp"
#include "runtime/validate.hpp"

namespace pipeworks {
namespace {

using clock_type = std::chrono::steady_clock;

status fail(std::string s) { return make_error(std::move(s)); }

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// --schedule none: gradient accumulation over m microbatches on one device (train_loop's loop,
// with stop_requested polled before each step).
template <class T>
result<pipeline_result> train_single(const model<T>& net, const param_set& initial,
                                     const pipeline_options& options, const train_config& cfg,
                                     const minibatch_fn& data, const metrics_fn& on_step,
                                     const weights_fn& on_weights) {
  const auto t0 = clock_type::now();
  trainer<T> t(net, initial.clone(), cfg);
  pipeline_result res;
  res.boundaries = {0, net.size()};
  while (t.steps_done() < cfg.steps) {
    if (options.stop_requested && options.stop_requested()) {
      res.interrupted = true;
      break;
    }
    auto mb = data(t.steps_done());
    if (!mb) return make_error("the data for step " + std::to_string(t.steps_done() + 1) + ": " +
                               mb.message());
    auto r = t.step(*mb);
    if (!r) return r.err();
    res.last = *r;
    if (on_step) on_step(res.last);
    if (on_weights) on_weights(std::make_shared<const model_weights>(model_weights{t.weights()}));
  }
  res.weights = {t.weights()};
  res.steps_done = t.steps_done();
  stage_stats st;
  st.peak_versions = 1;
  st.steps = static_cast<int>(t.steps_done());
  res.stages = {st};
  res.wall_s = since(t0);
  return res;
}

// CAF's scheduler runs the tracer, the partition actor and, unless detached, the ranks and
// reducers: two threads when the ranks have threads of their own, else one per rank up to the
// cores.
int scheduler_threads(const pipeline_options& o, int ranks) {
  if (o.detached) return 2;
  // A throttled rank sleeps on its thread: every rank needs one so the others keep running.
  if (std::any_of(o.device_speed.begin(), o.device_speed.end(), [](double s) { return s < 1; }))
    return std::max(2, ranks);
  const int cores = usable_cores();
  return std::clamp(ranks, 2, std::max(2, cores));
}

template <class T>
result<pipeline_result> train_actors(const model<T>& net, const param_set& initial,
                                     const pipeline_options& options, const train_config& cfg,
                                     const minibatch_fn& data, const metrics_fn& on_step,
                                     const weights_fn& on_weights) {
  const auto t0 = clock_type::now();
  const schedule_params sp{options.stages, options.microbatches, options.chunks, options.replicas,
                           static_cast<int>(cfg.steps)};
  auto made = make_schedule(*options.schedule, sp);
  if (!made) return made.err();
  schedule lowered = lower_communication(std::move(*made));
  if (status s = validate(lowered); !s)
    return make_error("the lowered schedule is not valid: " + s.message());
  auto plan = std::make_shared<const schedule>(std::move(lowered));
  const int ranks = plan->ranks();

  // Everything that can fail is worked out before the first actor exists.
  const int min_window = min_credit_window(*plan);
  if (options.credit_window > 0 && options.credit_window < min_window)
    return make_error("a credit window of " + std::to_string(options.credit_window) +
                      " deadlocks this schedule: it needs at least " + std::to_string(min_window) +
                      " messages in flight per link (0 picks it)");
  const int window = options.credit_window > 0 ? options.credit_window : min_window;
  if (options.fault.kind != fault_kind::none) {
    bool found = false;
    for (int d = 0; d < options.stages && !found; ++d)
      for (const action& a : plan->programs[plan->rank_of(options.fault.replica, d)])
        found = found || a == options.fault.at;
    if (!found)
      return make_error("the fault's action " + to_string(options.fault.at) +
                        " is not in the programs of replica " +
                        std::to_string(options.fault.replica));
  }
  caf::actor_system_config config;
  config.set("scheduler.max-threads", scheduler_threads(options, ranks));
  std::shared_ptr<driver_outcome> outcome;
  std::string lost;
  {
    caf::actor_system sys{config};
    auto board = std::make_shared<rank_board>(ranks);
    caf::actor tracer;
    if (options.record_trace)
      tracer = spawn_tracer(sys, ranks, options.stages,
                            std::string(schedule_name(plan->kind)) + " p=" +
                                std::to_string(options.stages) + " m=" +
                                std::to_string(options.microbatches) + " (measured)");

    auto ds = std::make_shared<driver_spec>();
    ds->plan = plan;
    ds->data = data;
    ds->on_step = on_step;
    ds->on_weights = on_weights;
    ds->stop_requested = options.stop_requested;
    ds->start = t0;
    ds->board = board;
    ds->tracer = tracer;
    caf::actor driver = spawn_driver(sys, ds);

    auto ps = std::make_shared<partition_spec<T>>();
    ps->net = &net;
    ps->initial = &initial;
    ps->plan = plan;
    ps->split = options.split;
    ps->train = cfg;
    ps->detached = options.detached;
    ps->threads_per_stage = options.threads_per_stage;
    ps->credit_window = window;
    ps->record_trace = options.record_trace;
    ps->fault = options.fault;
    ps->device_speed = options.device_speed;
    ps->start = t0;
    ps->board = board;
    ps->driver = driver;
    caf::actor partition = spawn_partition<T>(sys, ps);

    {
      caf::scoped_actor self{sys};
      self->monitor(driver);
      self->send(driver, run_atom::value, partition);
      bool waiting = true;
      self->receive_while(waiting)(
          [&](const outcome_box& b) {
            outcome = b.outcome;
            waiting = false;
          },
          [&](const caf::down_msg& dm) {
            if (dm.source != driver.address()) return;
            lost = "the driver stopped without an outcome (" + sys.render(dm.reason) + ")";
            waiting = false;
          });
      // The driver stopped the ranks and reducers; these two it may not have reached.
      self->send_exit(partition, caf::exit_reason::user_shutdown);
      if (tracer) self->send_exit(tracer, caf::exit_reason::user_shutdown);
    }
    sys.await_all_actors_done();  // no thread of the run is left behind, even after an error
  }
  if (!outcome) return make_error(lost);
  if (!outcome->run_status) return make_error(outcome->run_status.message());
  pipeline_result res;
  res.plan = plan;
  res.boundaries = std::move(outcome->boundaries);
  res.weights = std::move(outcome->weights);
  res.stages = std::move(outcome->stages);
  res.last = outcome->last;
  res.steps_done = outcome->steps_done;
  res.interrupted = outcome->interrupted;
  res.trace = std::move(outcome->trace);
  res.wall_s = since(t0);
  return res;
}

}  // namespace

status check(const pipeline_options& o, int blocks) {
  if (o.stages < 1) return fail("stages must be at least 1 (got " + std::to_string(o.stages) + ")");
  if (o.microbatches < 1)
    return fail("microbatches must be at least 1 (got " + std::to_string(o.microbatches) + ")");
  if (o.replicas < 1)
    return fail("replicas must be at least 1 (got " + std::to_string(o.replicas) + ")");
  if (o.chunks < 1) return fail("chunks must be at least 1 (got " + std::to_string(o.chunks) + ")");
  if (o.threads_per_stage < 1)
    return fail("threads per stage must be at least 1 (got " +
                std::to_string(o.threads_per_stage) + ")");
  if (o.credit_window < 0)
    return fail("the credit window must be 0 (automatic) or positive (got " +
                std::to_string(o.credit_window) + ")");
  train_config cfg = o.train;
  cfg.microbatches = o.microbatches;
  if (status s = validate(cfg); !s) return s;
  if (!o.schedule) {
    if (o.replicas != 1)
      return fail("without a schedule training runs on one device: replicas must be 1 (got " +
                  std::to_string(o.replicas) + ")");
    if (o.fault.kind != fault_kind::none)
      return fail("fault injection needs a pipeline schedule");
    if (!o.device_speed.empty()) return fail("throttled device speeds need a pipeline schedule");
    return {};
  }
  const int V = o.stages * o.chunks;
  if (blocks < V)
    return fail("the model has " + std::to_string(blocks) + " blocks, fewer than the " +
                std::to_string(V) + " virtual stages (stages " + std::to_string(o.stages) +
                " x chunks " + std::to_string(o.chunks) + ")");
  if (!o.split.empty()) {
    if (static_cast<int>(o.split.size()) != V)
      return fail("the split names " + std::to_string(o.split.size()) +
                  " first blocks, but there are " + std::to_string(V) + " virtual stages");
    if (o.split[0] != 0) return fail("the split must start at block 0");
    for (std::size_t i = 1; i < o.split.size(); ++i)
      if (o.split[i] <= o.split[i - 1])
        return fail("the split must increase: entry " + std::to_string(i) + " (" +
                    std::to_string(o.split[i]) + ") is not after " +
                    std::to_string(o.split[i - 1]));
    if (o.split.back() >= blocks)
      return fail("the split's last first block " + std::to_string(o.split.back()) +
                  " is past the model's last block " + std::to_string(blocks - 1));
  }
  const schedule_params sp{o.stages, o.microbatches, o.chunks, o.replicas, 1};
  if (auto s = make_schedule(*o.schedule, sp); !s) return fail(s.message());
  if (!o.device_speed.empty()) {
    if (static_cast<int>(o.device_speed.size()) != o.stages * o.replicas)
      return fail("device_speed gives " + std::to_string(o.device_speed.size()) +
                  " speeds, but there are " + std::to_string(o.stages * o.replicas) +
                  " ranks (stages x replicas)");
    for (std::size_t r = 0; r < o.device_speed.size(); ++r)
      if (!(o.device_speed[r] > 0.0 && o.device_speed[r] <= 1.0))
        return fail("the device speed of rank " + std::to_string(r) + " is " +
                    std::to_string(o.device_speed[r]) +
                    ", not in (0, 1] (1 is one full core of this machine)");
  }
  if (o.fault.kind != fault_kind::none) {
    if (o.fault.replica < 0 || o.fault.replica >= o.replicas)
      return fail("the fault's replica " + std::to_string(o.fault.replica) + " is not in 0.." +
                  std::to_string(o.replicas - 1));
    if (o.fault.at.stage < 0 || o.fault.at.stage >= V)
      return fail("the fault's stage " + std::to_string(o.fault.at.stage) + " is not in 0.." +
                  std::to_string(V - 1));
    const action_kind k = o.fault.at.kind;
    const bool computes = is_compute(k) || k == action_kind::step;
    const bool poisons = k == action_kind::forward ||
                         ((k == action_kind::backward || k == action_kind::input_grad) &&
                          o.fault.at.stage > 0);
    if ((o.fault.kind == fault_kind::exception && !computes) ||
        (o.fault.kind == fault_kind::nan && !poisons))
      return fail("a fault of that kind at " + to_string(o.fault.at) +
                  " would do nothing: exceptions are raised in F, B, I, W or STEP, and nan "
                  "poisons the output of an F or the input gradient of a B or I after stage 0");
  }
  return {};
}

template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const pipeline_options& options, const minibatch_fn& data,
                                       const metrics_fn& on_step, const weights_fn& on_weights) {
  if (status s = check(options, m.size()); !s) return make_error(s.message());
  if (!data) return make_error("train_pipeline needs a data callback");
  train_config cfg = options.train;
  cfg.microbatches = options.microbatches;
  try {
    if (!options.schedule)
      return train_single(m, initial, options, cfg, data, on_step, on_weights);
    return train_actors(m, initial, options, cfg, data, on_step, on_weights);
  } catch (const std::exception& e) {
    return make_error(std::string("training failed: ") + e.what());
  }
}

template result<pipeline_result> train_pipeline<float>(const model<float>&, const param_set&,
                                                       const pipeline_options&,
                                                       const minibatch_fn&, const metrics_fn&,
                                                       const weights_fn&);
template result<pipeline_result> train_pipeline<double>(const model<double>&, const param_set&,
                                                        const pipeline_options&,
                                                        const minibatch_fn&, const metrics_fn&,
                                                        const weights_fn&);

}  // namespace pipeworks
