// The partition actor: resolve_plan, lower_run, then one stage actor per rank (rank_setup's
// setup, the initial weights or the rank's checkpoint file) and one reducer per virtual stage
// when w > 1. It answers one plan_atom, then quits.
#include "actors/partition_actor.hpp"
#include "base/exception_text.hpp"

#include <exception>
#include <string>
#include <utility>

#include "actors/reducer_actor.hpp"
#include "actors/stage_actor.hpp"
#include "actors/type_ids.hpp"
#include "ops/model/param_split.hpp"
#include "partition/plan_resolve.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/exec/rank_setup.hpp"

namespace pipeworks {
namespace {

template <class T>
result<pipeline_wiring> build(caf::actor_system& sys, partition_spec<T>& spec) {
  const model<T>& net = *spec.net;
  const sample_fn sample = [&](std::int64_t rows) -> result<minibatch> {
    run_plan at = spec.plan;
    at.data.batch = rows;
    auto fn = spec.data(at);
    if (!fn) return fn.err();
    return (*fn)(at.data.position);
  };
  auto resolved = resolve_plan(spec.plan, net, sample);
  if (!resolved) return resolved.err();
  auto run = lower_run(resolved->plan, net.size());
  if (!run) return run.err();
  const schedule& programs = *run->programs;
  const run_plan& plan = run->plan;
  const int V = plan.virtual_stages();

  std::vector<param_set> pieces;
  if (!spec.resume) {
    auto cut = split_params(*spec.initial, run->boundaries);
    if (!cut) return cut.err();
    pieces = std::move(*cut);
  }
  const metadata_map identity{{"pipeworks.model", to_json(plan.model).dump()},
                              {"pipeworks.schedule", std::string(schedule_name(*plan.schedule))}};
  pipeline_wiring wiring;
  wiring.plan = to_json_text(plan);
  wiring.report = resolved->report;
  if (!resolved->summary.is_null()) wiring.summary = resolved->summary.dump();
  const auto start = spec.start;
  for (int r = 0; r < programs.ranks(); ++r) {
    auto st = std::make_shared<stage_spec<T>>();
    st->net = spec.net;
    st->threads = plan.threads_per_stage;
    st->board = spec.board;
    st->driver = spec.driver;
    st->checkpoint_dir = plan.checkpoint.dir;
    st->identity = identity;
    executor_setup& es = st->setup;
    es = rank_setup(*run, r);
    es.clock = [start] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    es.record_trace = spec.hooks.record_trace;
    es.fault = spec.hooks.fault;
    if (spec.resume) {
      st->resume_dir = step_dir(plan.checkpoint.dir, spec.resume->step);
      st->resume = spec.resume->files.at(static_cast<std::size_t>(r));
    } else {
      for (int s = 0; s < V; ++s)
        if (programs.device_of[static_cast<std::size_t>(s)] == es.device)
          st->initial.push_back(pieces[static_cast<std::size_t>(s)].clone());
    }
    wiring.ranks.push_back(spawn_stage<T>(sys, plan.detached, std::move(st)));
  }
  wiring.reducers.resize(static_cast<std::size_t>(V));
  if (plan.replicas > 1)
    for (int s = 0; s < V; ++s)
      wiring.reducers[static_cast<std::size_t>(s)] =
          spawn_reducer(sys, plan.detached, s, plan.replicas, spec.driver);
  return wiring;
}

template <class T>
caf::behavior partition_actor(caf::event_based_actor* self,
                              std::shared_ptr<partition_spec<T>> spec) {
  return {
      [self, spec](plan_atom) {
        auto rp = self->make_response_promise();
        result<pipeline_wiring> wiring = make_error("");
        try {
          wiring = build(self->system(), *spec);
        } catch (const std::exception& e) {
          wiring = make_error(exception_text(e));
        }
        if (wiring)
          rp.deliver(std::move(*wiring));
        else
          rp.deliver(caf::make_error(caf::sec::runtime_error, wiring.message()));
        self->quit();
      },
  };
}

}  // namespace

template <class T>
caf::actor spawn_partition(caf::actor_system& sys, std::shared_ptr<partition_spec<T>> spec) {
  return sys.spawn(partition_actor<T>, std::move(spec));
}

template caf::actor spawn_partition<float>(caf::actor_system&,
                                           std::shared_ptr<partition_spec<float>>);
template caf::actor spawn_partition<double>(caf::actor_system&,
                                            std::shared_ptr<partition_spec<double>>);

}  // namespace pipeworks
