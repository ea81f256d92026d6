// train_pipeline: checks the plan and its checkpoint directory, then starts a CAF actor system
// with the driver and the partition actor, waits for the driver's outcome and shuts everything
// down. `--schedule none` runs the single-device trainer instead, with the same checkpoints.
#include "actors/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "actors/driver.hpp"
#include "actors/partition_actor.hpp"
#include "actors/stage_actor.hpp"
#include "actors/type_ids.hpp"
#include "partition/cpu_count.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_file.hpp"
#include "runtime/exec/rank_setup.hpp"

namespace pipeworks {
namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The checkpoint a resumed run starts from, checked against the plan.
struct resume_point {
  checkpoint_manifest manifest;
  std::int64_t samples = 0;
};

// Prepares the checkpoint directory: a new run refuses one that holds checkpoints; a resumed run
// reads the manifest of its position and clears checkpoints cut short after it.
result<std::optional<resume_point>> prepare_checkpoints(const run_plan& plan) {
  const checkpoint_spec& c = plan.checkpoint;
  const bool resuming = plan.data.position > 0;
  if (!resuming) {
    if (c.every > 0)
      if (status s = prepare_checkpoint_dir(c.dir, false); !s) return make_error(s.message());
    return std::optional<resume_point>{};
  }
  if (c.dir.empty())
    return make_error("data.position is " + std::to_string(plan.data.position) +
                      ", but checkpoint.dir names no directory to resume from");
  auto m = read_manifest(c.dir, plan.data.position);
  if (!m) return m.err();
  resume_point r;
  if (m->metrics.is_object() && m->metrics.contains("samples") && m->metrics["samples"].is_number_integer())
    r.samples = m->metrics["samples"].get<std::int64_t>();
  r.manifest = std::move(*m);
  if (status s = prepare_checkpoint_dir(c.dir, true); !s) return make_error(s.message());
  for (std::int64_t n = plan.data.position + std::max<std::int64_t>(c.every, 1);
       c.every > 0 && n < plan.train.steps; n += c.every)
    if (std::filesystem::exists(step_dir(c.dir, n)))
      if (status s = prepare_step_dir(c.dir, n); !s) return make_error(s.message());
  return std::optional<resume_point>{std::move(r)};
}

// The manifest of a checkpoint after `step` whose files are written.
checkpoint_manifest manifest_of(const run_plan& plan, std::int64_t step, std::int64_t samples,
                                double elapsed, std::vector<checkpoint_file> files) {
  checkpoint_manifest m;
  m.step = step;
  run_plan at = plan;
  at.data.position = step;
  m.plan = nlohmann::json::parse(to_json_text(at));
  m.data_position = step;
  m.rng = {{"data_seed", plan.data.seed},
           {"init_seed", plan.init_seed},
           {"data", "step t's minibatch is drawn from (data_seed, t) alone, so data_position is the "
                    "whole state of the data stream; no layer draws random numbers while training"}};
  m.metrics = {{"samples", samples}, {"elapsed_s", elapsed}};
  m.files = std::move(files);
  return m;
}

// --schedule none: gradient accumulation over m microbatches on one device, with the plan's
// checkpoints (one rank file: the weights and the optimizer state) and stop_requested polled
// before each step.
template <class T>
result<pipeline_result> train_single(const model<T>& net, const param_set& initial,
                                     const run_plan& plan, const data_factory& make_data,
                                     const pipeline_callbacks& cb,
                                     const std::optional<resume_point>& resume) {
  const auto t0 = clock_type::now();
  if (cb.on_plan)
    if (status s = cb.on_plan(plan, ""); !s) return make_error(s.message());
  auto data = make_data(plan);
  if (!data) return make_error("the data: " + data.message());
  trainer<T> t(net, initial.clone(), plan.train);
  std::int64_t samples = 0;
  const std::vector<int> whole{0, net.size()};
  if (resume) {
    auto state = load_rank_checkpoint(step_dir(plan.checkpoint.dir, resume->manifest.step),
                                      resume->manifest.files.at(0), net, whole,
                                      {{"pipeworks.model", to_json(plan.model).dump()},
                                       {"pipeworks.schedule", "none"}});
    if (!state) return state.err();
    stage_state& st = state->stages.at(0);
    std::vector<optimizer_state<T>> opt(st.updates.size());
    for (std::size_t e = 0; e < opt.size(); ++e) {
      auto copy = [](const tensor& x) {
        if (x.empty()) return std::vector<T>{};
        auto s = x.span<T>();
        return std::vector<T>(s.begin(), s.end());
      };
      opt[e].m = copy(st.moment1.at(e));
      opt[e].v = copy(st.moment2.at(e));
      opt[e].step = st.updates[e];
    }
    t.restore(st.versions.at(st.latest), std::move(opt), resume->manifest.step);
    samples = resume->samples;
  }
  pipeline_result res;
  res.plan = plan;
  res.boundaries = whole;
  while (t.steps_done() < plan.train.steps) {
    if (cb.stop_requested && cb.stop_requested()) {
      res.interrupted = true;
      break;
    }
    auto mb = (*data)(t.steps_done());
    if (!mb) return make_error("the data for step " + std::to_string(t.steps_done() + 1) + ": " +
                               mb.message());
    auto r = t.step(*mb);
    if (!r) return r.err();
    samples += mb->inputs.dim(0);
    res.last = *r;
    res.last.samples = samples;
    res.last.elapsed_s = since(t0);
    if (cb.on_step) cb.on_step(res.last);
    const std::int64_t n = t.steps_done();
    const bool publish = plan.weights_every > 0 && (n % plan.weights_every == 0 || n == plan.train.steps);
    if (publish && cb.on_weights)
      cb.on_weights(std::make_shared<const model_weights>(model_weights{t.weights()}));
    if (plan.checkpoint.every > 0 && n % plan.checkpoint.every == 0 && n < plan.train.steps) {
      rank_state s;
      s.step = n;
      stage_state st;
      st.latest = static_cast<int>(n);
      st.versions[st.latest] = t.weights();
      for (const optimizer_state<T>& o : t.optimizer_state_now()) {
        auto make = [](const std::vector<T>& v) {
          if (v.empty()) return tensor{};
          tensor x({static_cast<std::int64_t>(v.size())}, dtype_of<T>());
          std::copy(v.begin(), v.end(), x.data<T>());
          return x;
        };
        st.moment1.push_back(make(o.m));
        st.moment2.push_back(make(o.v));
        st.updates.push_back(o.step);
      }
      s.stages.push_back(std::move(st));
      const std::string dir = step_dir(plan.checkpoint.dir, n);
      if (status p = prepare_step_dir(plan.checkpoint.dir, n); !p) return make_error(p.message());
      const std::string file = rank_file_name(0);
      auto written = write_rank_file(dir + "/" + file, s,
                                     {{"pipeworks.model", to_json(plan.model).dump()},
                                      {"pipeworks.schedule", "none"}});
      if (!written) return make_error("writing the checkpoint of step " + std::to_string(n) + ": " + written.message());
      if (status w = write_manifest(plan.checkpoint.dir,
                                    manifest_of(plan, n, samples, since(t0),
                                                {checkpoint_file{0, file, written->bytes, written->sha256}}));
          !w)
        return make_error(w.message());
      if (status pr = prune_checkpoints(plan.checkpoint.dir, plan.checkpoint.keep); !pr)
        return make_error(pr.message());
      if (cb.on_checkpoint) cb.on_checkpoint(n, dir);
    }
  }
  res.weights = {t.weights()};
  res.weight_steps = {static_cast<int>(t.steps_done())};
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
// cores (the plan may not know its ranks before the planner ran: then one per usable core).
int scheduler_threads(const run_plan& p) {
  if (p.detached) return 2;
  const int ranks = p.auto_partition ? usable_cores() : p.rank_count();
  // A throttled rank sleeps on its thread: every rank needs one so the others keep running.
  if (std::any_of(p.ranks.begin(), p.ranks.end(), [](const rank_placement& r) { return r.speed < 1; }))
    return std::max(2, ranks);
  return std::clamp(ranks, 2, std::max(2, usable_cores()));
}

template <class T>
result<pipeline_result> train_actors(const model<T>& net, const param_set& initial,
                                     const run_plan& plan, const data_factory& data,
                                     const pipeline_callbacks& cb, const pipeline_hooks& hooks,
                                     std::optional<resume_point> resume) {
  const auto t0 = clock_type::now();
  caf::actor_system_config config;
  add_message_types(config);
  config.set("scheduler.max-threads", scheduler_threads(plan));
  std::optional<run_outcome> outcome;
  std::string lost;
  {
    caf::actor_system sys{config};
    auto board = std::make_shared<rank_board>();
    auto ds = std::make_shared<driver_spec>();
    ds->data = data;
    ds->callbacks = cb;
    ds->blocks = net.size();
    ds->record_trace = hooks.record_trace;
    ds->resume_samples = resume ? resume->samples : 0;
    ds->start = t0;
    ds->board = board;
    caf::actor driver = spawn_driver(sys, ds);

    auto ps = std::make_shared<partition_spec<T>>();
    ps->net = &net;
    ps->initial = &initial;
    ps->plan = plan;
    ps->data = data;
    ps->hooks = hooks;
    if (resume) ps->resume = resume->manifest;
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
          [&](run_outcome& o) {
            outcome = std::move(o);
            waiting = false;
          },
          [&](const caf::down_msg& dm) {
            if (dm.source != driver.address()) return;
            lost = "the driver stopped without an outcome (" + sys.render(dm.reason) + ")";
            waiting = false;
          });
      // The driver stopped the ranks and reducers; the partition actor it may not have reached.
      self->send_exit(partition, caf::exit_reason::user_shutdown);
    }
    sys.await_all_actors_done();  // no thread of the run is left behind, even after an error
  }
  if (!outcome) return make_error(lost);
  if (!outcome->ok) return make_error(outcome->error);
  pipeline_result res;
  auto resolved = parse_run_plan(outcome->plan, "the resolved plan");
  if (!resolved) return resolved.err();
  auto run = lower_run(*resolved, net.size());
  if (!run) return run.err();
  res.plan = std::move(*resolved);
  res.report = std::move(outcome->report);
  res.plan_summary = std::move(outcome->summary);
  res.programs = run->programs;
  res.boundaries = run->boundaries;
  res.weights = std::move(outcome->weights);
  res.weight_steps = std::move(outcome->weight_steps);
  res.stages = std::move(outcome->stages);
  res.last = outcome->last;
  res.steps_done = outcome->steps_done;
  res.interrupted = outcome->interrupted;
  res.trace = std::move(outcome->trace);
  res.wall_s = since(t0);
  return res;
}

}  // namespace

status check(const run_plan& plan, const pipeline_hooks& hooks) {
  const fault_injection& f = hooks.fault;
  if (f.kind == fault_kind::none) return {};
  if (!plan.schedule) return make_error("fault injection needs a pipeline schedule");
  const int V = plan.virtual_stages();
  if (f.replica < 0 || f.replica >= plan.replicas)
    return make_error("the fault's replica " + std::to_string(f.replica) + " is not in 0.." +
                      std::to_string(plan.replicas - 1));
  if (f.at.stage < 0 || f.at.stage >= V)
    return make_error("the fault's stage " + std::to_string(f.at.stage) + " is not in 0.." +
                      std::to_string(V - 1));
  const action_kind k = f.at.kind;
  const bool computes = is_compute(k) || k == action_kind::step;
  const bool poisons = k == action_kind::forward ||
                       ((k == action_kind::backward || k == action_kind::input_grad) && f.at.stage > 0);
  if ((f.kind == fault_kind::exception && !computes) || (f.kind == fault_kind::nan && !poisons))
    return make_error("a fault of that kind at " + to_string(f.at) +
                      " would do nothing: exceptions are raised in F, B, I, W or STEP, and nan "
                      "poisons the output of an F or the input gradient of a B or I after stage 0");
  if (!plan.auto_partition) {  // the action must be in the replica's programs
    auto programs = plan_programs(plan);
    if (!programs) return make_error(programs.message());
    bool found = false;
    for (int d = 0; d < plan.stages && !found; ++d)
      for (const action& a : (*programs)->programs[static_cast<std::size_t>((*programs)->rank_of(f.replica, d))])
        found = found || a == f.at;
    if (!found)
      return make_error("the fault's action " + to_string(f.at) +
                        " is not in the programs of replica " + std::to_string(f.replica));
  }
  return {};
}

template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const run_plan& given, const data_factory& data,
                                       const pipeline_callbacks& callbacks,
                                       const pipeline_hooks& hooks) {
  if (status s = check(given, m.size()); !s) return make_error(s.message());
  if (!data) return make_error("train_pipeline needs a data callback");
  run_plan plan = given;
  if (plan.schedule && plan.split.empty() && !plan.auto_partition && plan.virtual_stages() == 1)
    plan.split = {0};
  if (status s = check(plan, hooks); !s) return make_error(s.message());
  auto resume = prepare_checkpoints(plan);
  if (!resume) return resume.err();
  if (*resume) {
    auto saved = parse_run_plan((*resume)->manifest.plan.dump(), "the checkpoint's plan");
    if (!saved) return saved.err();
    auto merged = resume_plan(*saved, plan);
    if (!merged) return make_error(step_dir(plan.checkpoint.dir, plan.data.position) + ": " + merged.message());
    plan = std::move(*merged);
  }
  try {
    if (!plan.schedule) return train_single(m, initial, plan, data, callbacks, *resume);
    return train_actors(m, initial, plan, data, callbacks, hooks, std::move(*resume));
  } catch (const std::exception& e) {
    return make_error(std::string("training failed: ") + e.what());
  }
}

template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const run_plan& plan, const minibatch_fn& data,
                                       const pipeline_callbacks& callbacks,
                                       const pipeline_hooks& hooks) {
  if (!data) return make_error("train_pipeline needs a data callback");
  const std::int64_t batch = plan.data.batch;
  data_factory fixed = [data, batch](const run_plan& resolved) -> result<minibatch_fn> {
    if (resolved.data.batch != batch)
      return make_error("the plan's batch became " + std::to_string(resolved.data.batch) +
                        ", but the data function gives batches of " + std::to_string(batch) +
                        "; pass a data_factory, which gets the resolved plan");
    return data;
  };
  return train_pipeline(m, initial, plan, fixed, callbacks, hooks);
}

#define PIPEWORKS_TRAIN_PIPELINE(T)                                                             \
  template result<pipeline_result> train_pipeline<T>(const model<T>&, const param_set&,         \
                                                     const run_plan&, const data_factory&,      \
                                                     const pipeline_callbacks&,                 \
                                                     const pipeline_hooks&);                    \
  template result<pipeline_result> train_pipeline<T>(const model<T>&, const param_set&,         \
                                                     const run_plan&, const minibatch_fn&,      \
                                                     const pipeline_callbacks&,                 \
                                                     const pipeline_hooks&);
PIPEWORKS_TRAIN_PIPELINE(float)
PIPEWORKS_TRAIN_PIPELINE(double)
#undef PIPEWORKS_TRAIN_PIPELINE

}  // namespace pipeworks
