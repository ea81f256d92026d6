// train_pipeline: checks the plan (unless the caller did) and its checkpoint directory, then
// starts a CAF actor system with the driver and the partition actor, waits for the driver's
// outcome and shuts everything down. `--schedule none` runs the single-device trainer instead.
#include "actors/pipeline.hpp"
#include "base/exception_text.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "actors/driver.hpp"
#include "actors/network.hpp"
#include "actors/rendezvous.hpp"
#include "actors/partition_actor.hpp"
#include "actors/type_ids.hpp"
#include "base/cpu_count.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/dir_lock.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "runtime/exec/single_device.hpp"

namespace pipeworks {
namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
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
                                     const run_plan& given_plan, const data_factory& data,
                                     const pipeline_callbacks& cb, const pipeline_hooks& hooks,
                                     std::optional<resume_point> resume) {
  const auto t0 = clock_type::now();
  caf::actor_system_config config;
  add_message_types(config);
  run_plan plan = given_plan;
  config.set("scheduler.max-threads", scheduler_threads(plan));
  process_spec& procs = plan.processes;
  if (!procs.workers.empty() || !procs.rendezvous.empty())
    use_network(config, std::chrono::milliseconds(procs.heartbeat_ms),
                std::chrono::milliseconds(procs.timeout_ms));
  std::optional<run_outcome> outcome;
  std::string lost;
  // The joined workers' connections to the rendezvous carry the run; the guard goes only after
  // the actor system, which flushes what it still has for them (the end of the run) first.
  std::unique_ptr<frame_guard> rendezvous_guard;
  {
    caf::actor_system sys{config};
    // The rendezvous actor the joined workers monitor lives until the run's end; its end before
    // they hold their ranks (any error return below) tells them the driver gave up.
    caf::actor rendezvous;
    struct end_at_exit {
      caf::actor& kept;
      std::string why = "the driver gave up before the run started";
      ~end_at_exit() { end_rendezvous(kept, why); }
    } rendezvous_end{rendezvous};
    if (!procs.rendezvous.empty()) {  // the workers join and say where they listen
      auto at = parse_host_port(procs.rendezvous);
      if (!at) return at.err();
      auto joined = await_workers(sys, *at, procs.world_size, std::chrono::milliseconds(procs.connect_ms),
                                  rendezvous_guard, rendezvous);
      if (!joined) return joined.err();
      procs.workers = std::move(*joined);
      procs.rendezvous.clear();
      procs.world_size = 0;
    }
    std::vector<caf::actor> workers;
    std::vector<connected_worker> greeted;
    for (std::size_t k = 0; k < procs.workers.size(); ++k) {
      auto at = parse_host_port(procs.workers[k]);
      if (!at) return at.err();
      auto w = connect_worker(sys, *at, std::chrono::milliseconds(procs.connect_ms),
                              "worker " + std::to_string(k + 1));
      if (!w) {
        rendezvous_end.why = w.message();
        return w.err();
      }
      workers.push_back(w->actor);
      greeted.push_back(std::move(*w));
    }
    // Declared after the system, so it goes before it: its receives are cancelled first.
    std::shared_ptr<wire_link> link;
    wire_peers peers;
    if (!workers.empty() && procs.transport == "ucx") {
      auto eps = process_endpoints();
      if (!eps) return make_error("--transport ucx: " + eps.message() + "; or use --transport caf");
      peers.nodes.push_back(sys.node());
      peers.scopes.push_back(eps->scope);
      peers.local_addresses.push_back(eps->local->address());
      peers.network_addresses.push_back(eps->network->address());
      for (std::size_t k = 0; k < workers.size(); ++k) {
        const connected_worker& g = greeted[k];
        if (g.ucx.empty() || g.ucx_network.empty())
          return make_error("worker " + std::to_string(k + 1) + " at " + procs.workers[k] +
                            " has no UCX (built without it, or UCX failed to start there: see its "
                            "log); start every process with UCX, or use --transport caf");
        peers.nodes.push_back(workers[k].node());
        peers.scopes.push_back(g.scope);
        peers.local_addresses.push_back(g.ucx);
        peers.network_addresses.push_back(g.ucx_network);
      }
      peers.nonce = static_cast<std::uint16_t>(std::random_device{}());
      link = std::make_shared<wire_link>(sys, *eps, 0, peers,
                                         wire_bound(net.param_count(), sizeof(T)),
                                         std::chrono::milliseconds(procs.timeout_ms));
    }
    auto board = std::make_shared<rank_board>();
    // The run's throttled sleeps in this process: its driver cuts them when it stops or ends.
    pipeline_hooks run_hooks = hooks;
    if (!run_hooks.sleeps) run_hooks.sleeps = std::make_shared<throttle_sleeps>();
    auto ds = std::make_shared<driver_spec>();
    ds->data = data;
    ds->callbacks = cb;
    ds->sleeps = run_hooks.sleeps;
    ds->record_trace = hooks.record_trace;
    ds->resume_samples = resume ? resume->samples : 0;
    ds->start = t0;
    ds->board = board;
    ds->workers = workers;
    ds->worker_addresses = procs.workers;
    ds->link = link;
    if (!workers.empty()) {
      ds->own_clock = std::make_shared<stall_clock>();
      if (hooks.driver_stopped.count() > 0) ds->own_clock->pretend_stopped(hooks.driver_stopped);
    }
    caf::actor driver = spawn_driver(sys, ds);
    if (link) link->set_driver(driver);

    auto ps = std::make_shared<partition_spec<T>>();
    ps->net = &net;
    ps->initial = &initial;
    ps->plan = plan;
    ps->data = data;
    ps->hooks = run_hooks;
    if (resume) ps->resume = resume->manifest;
    ps->start = t0;
    ps->board = board;
    ps->driver = driver;
    for (const connected_worker& g : greeted) ps->worker_frames.push_back(g.max_frame);
    ps->workers = std::move(workers);
    ps->link = link;
    ps->peers = peers;
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
    // A worker that holds ranks heard the run's end from the driver; one that holds none (the
    // run failed before it was sent them) hears why here.
    end_rendezvous(rendezvous, outcome ? (outcome->ok ? std::string() : outcome->error) : lost);
    sys.await_all_actors_done();  // no thread of the run is left behind, even after an error
  }
  if (!outcome) return make_error(lost);
  if (!outcome->ok) return make_error(outcome->error);
  if (!outcome->run) return make_error("the driver's outcome has no plan");
  // The run as the partition actor lowered it, handed over: not read or lowered again.
  const lowered_run& run = *outcome->run;
  pipeline_result res;
  res.plan = run.plan;
  res.report = std::move(outcome->report);
  res.plan_summary = std::move(outcome->summary);
  res.programs = run.programs;
  res.boundaries = run.boundaries;
  res.weights = std::move(outcome->weights);
  res.weight_steps = std::move(outcome->weight_steps);
  // The model's stages: one route's (dualpipe's other copies hold the same weights).
  const auto model_stages = static_cast<std::size_t>(run.plan.model_stages());
  if (res.weights.size() > model_stages) res.weights.resize(model_stages);
  if (res.weight_steps.size() > model_stages) res.weight_steps.resize(model_stages);
  res.stages = std::move(outcome->stages);
  res.last = outcome->last;
  res.steps_done = outcome->steps_done;
  res.interrupted = outcome->interrupted;
  res.trace = std::move(outcome->trace);
  res.wall_s = since(t0);
  return res;
}

}  // namespace

template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const run_plan& given, const data_factory& data,
                                       const pipeline_callbacks& callbacks,
                                       const pipeline_hooks& hooks) {
  auto checked = check_plan(given, m.size());
  if (!checked) return checked.err();
  return train_pipeline(m, initial, *checked, data, callbacks, hooks);
}

template <class T>
result<pipeline_result> train_pipeline(const model<T>& m, const param_set& initial,
                                       const checked_plan& checked, const data_factory& data,
                                       const pipeline_callbacks& callbacks,
                                       const pipeline_hooks& hooks) {
  if (!data) return make_error("train_pipeline needs a data callback");
  if (checked.blocks() != m.size())
    return make_error("the plan was checked for a model of " + std::to_string(checked.blocks()) +
                      " blocks, not for this one of " + std::to_string(m.size()));
  // What follows keeps the plan checked: an absolute directory, the one split of one stage, a
  // run name of the right form; a resumed run's merged plan, when it differs, is checked anew.
  run_plan plan = checked.get();
  // Workers may run elsewhere in the file tree: they get the checkpoint directory absolute.
  if ((!plan.processes.workers.empty() || !plan.processes.rendezvous.empty()) &&
      !plan.checkpoint.dir.empty())
    plan.checkpoint.dir = std::filesystem::absolute(plan.checkpoint.dir).lexically_normal().string();
  if (plan.schedule && plan.split.empty() && !plan.auto_partition && plan.virtual_stages() == 1)
    plan.split = {0};
  if (status s = check(plan, hooks); !s) return make_error(s.message());
  // Held until the run returns: no other run writes, prunes or clears these checkpoints meanwhile.
  std::optional<dir_lock> lock;
  if (!plan.checkpoint.dir.empty() && (plan.checkpoint.every > 0 || plan.data.position > 0)) {
    auto taken = dir_lock::take(plan.checkpoint.dir);
    if (!taken) return taken.err();
    lock.emplace(std::move(*taken));
  }
  auto resume = prepare_checkpoints(plan);
  if (!resume) return resume.err();
  if (*resume) {
    auto saved = parse_run_plan((*resume)->manifest.plan.dump(), "the checkpoint's plan", m.size());
    if (!saved) return saved.err();
    if (saved->data.path != plan.data.path)  // the same words name the same path, as before
      saved->data.path = checkpoint_data_path((*resume)->manifest, saved->data.path);
    auto merged = resume_plan(*saved, plan, hooks.resume_on_other_data);
    if (!merged) return make_error(step_dir(plan.checkpoint.dir, plan.data.position) + ": " + merged.message());
    if (to_json_text(*merged) != to_json_text(plan))  // the checkpoint's partitioning, say
      if (status s = check(*merged, m.size()); !s)
        return make_error(step_dir(plan.checkpoint.dir, plan.data.position) + ": " + s.message());
    plan = std::move(*merged);
  }
  // Workers with checkpoint directories of their own keep this run's files apart from other runs'.
  if ((!plan.processes.workers.empty() || !plan.processes.rendezvous.empty()) &&
      plan.checkpoint.every > 0 && plan.checkpoint.run.empty())
    plan.checkpoint.run = new_run_name();
  try {
    if (!plan.schedule) return train_single(m, initial, plan, data, callbacks, *resume);
    return train_actors(m, initial, plan, data, callbacks, hooks, std::move(*resume));
  } catch (const std::exception& e) {
    return make_error(std::string("training failed: ") + exception_text(e));
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
                                                     const checked_plan&, const data_factory&,  \
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
