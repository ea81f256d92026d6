// The partition actor: boundaries, the initial weights of each rank's virtual stages, one stage
// actor per rank and one reducer per virtual stage when w > 1. It answers one plan_atom, then quits.
#include "actors/partition_actor.hpp"

#include <exception>
#include <string>
#include <utility>

#include "actors/messages.hpp"
#include "actors/reducer_actor.hpp"
#include "actors/stage_actor.hpp"
#include "ops/model/param_split.hpp"
#include "partition/even_split.hpp"

namespace pipeworks {

template <class T>
result<std::vector<int>> plan_boundaries(const model<T>& net, const std::vector<int>& split,
                                         int virtual_stages) {
  if (split.empty()) return even_split(net.costs(), virtual_stages);
  std::vector<int> b = split;
  b.push_back(net.size());
  return b;
}

namespace {

template <class T>
result<pipeline_wiring> build(caf::actor_system& sys, partition_spec<T>& spec) {
  const schedule& plan = *spec.plan;
  const int p = plan.params.stages, w = plan.params.replicas, V = plan.virtual_stages;
  auto bounds = plan_boundaries(*spec.net, spec.split, V);
  if (!bounds) return bounds.err();
  auto pieces = split_params(*spec.initial, *bounds);
  if (!pieces) return pieces.err();

  pipeline_wiring wiring;
  wiring.boundaries = *bounds;
  for (const param_set& piece : *pieces)
    wiring.initial.push_back(std::make_shared<const param_set>(piece.clone()));
  const auto start = spec.start;
  for (int r = 0; r < w; ++r) {
    for (int d = 0; d < p; ++d) {
      auto st = std::make_shared<stage_spec<T>>();
      st->net = spec.net;
      st->threads = spec.threads_per_stage;
      st->board = spec.board;
      st->driver = spec.driver;
      executor_setup& es = st->setup;
      es.plan = spec.plan;
      es.replica = r;
      es.device = d;
      es.boundaries = *bounds;
      es.train = spec.train;
      es.credit_window = spec.credit_window;
      es.clock = [start] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      es.record_trace = spec.record_trace;
      es.fault = spec.fault;
      if (!spec.device_speed.empty())
        es.speed = spec.device_speed.at(static_cast<std::size_t>(plan.rank_of(r, d)));
      for (int s = 0; s < V; ++s)
        if (plan.device_of[static_cast<std::size_t>(s)] == d)
          st->initial.push_back((*pieces)[static_cast<std::size_t>(s)].clone());
      wiring.ranks.push_back(spawn_stage<T>(sys, spec.detached, std::move(st)));
    }
  }
  wiring.reducers.resize(static_cast<std::size_t>(V));
  if (w > 1)
    for (int s = 0; s < V; ++s)
      wiring.reducers[static_cast<std::size_t>(s)] =
          spawn_reducer(sys, spec.detached, s, w, spec.driver);
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
          wiring = make_error(e.what());
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

template result<std::vector<int>> plan_boundaries<float>(const model<float>&,
                                                         const std::vector<int>&, int);
template result<std::vector<int>> plan_boundaries<double>(const model<double>&,
                                                          const std::vector<int>&, int);
template caf::actor spawn_partition<float>(caf::actor_system&,
                                           std::shared_ptr<partition_spec<float>>);
template caf::actor spawn_partition<double>(caf::actor_system&,
                                            std::shared_ptr<partition_spec<double>>);

}  // namespace pipeworks
