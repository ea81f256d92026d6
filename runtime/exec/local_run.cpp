// run_local: all ranks of a pipeline on one thread; FIFO links picked in seeded random order.
#include "runtime/exec/local_run.hpp"
#include "base/exception_text.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include "ops/model/param_split.hpp"
#include "runtime/exec/driver_core.hpp"
#include "runtime/exec/reducer.hpp"
#include "runtime/program_walk.hpp"

namespace pipeworks {

lowered_run local_lowered_run(std::shared_ptr<const schedule> programs, std::vector<int> boundaries,
                              const train_config& cfg, int credit_window) {
  lowered_run r;
  const schedule& s = *programs;
  r.plan.schedule = s.kind;
  r.plan.stages = s.params.stages;
  r.plan.chunks = s.params.chunks;
  r.plan.replicas = s.params.replicas;
  r.plan.train = cfg;
  r.plan.train.microbatches = s.params.microbatches;
  r.plan.train.steps = s.params.steps;
  r.boundaries = std::move(boundaries);
  auto prepared = prepare_programs(s, r.plan);
  if (!prepared) throw pipeworks_error(prepared.message());
  r.programs = std::move(*prepared);
  r.credit_window = credit_window > 0 ? credit_window : min_credit_window(*r.programs);
  return r;
}

template <class T>
result<local_run_result> run_local(const model<T>& mdl, const lowered_run& run,
                                   const param_set& initial, const minibatch_fn& data,
                                   local_run_options options) {
  const schedule& s = *run.programs;
  const int w = s.params.replicas;
  const int S = s.virtual_stages;
  const int p = s.params.stages;
  const bool resuming = !options.resume.empty();
  if (resuming && static_cast<int>(options.resume.size()) != s.ranks())
    return make_error("run_local: " + std::to_string(options.resume.size()) + " snapshots for " +
                      std::to_string(s.ranks()) + " ranks");
  const std::int64_t first = resuming ? options.resume[0].step : 0;
  for (const rank_state& st : options.resume)
    if (st.step != first) return make_error("run_local: the snapshots are of different steps");

  local_run_result out;
  out.credit_window = run.credit_window;
  // One FIFO queue per link (sender, receiver); -1 is the driver, -2 - s the reducer of stage s
  // (with routes, of piece s, whose members are every replica's copy on every route).
  const int members = s.reduce_group_size();
  std::map<std::pair<int, int>, std::deque<message>> links;
  std::map<int, gradient_reducer> reducers;
  driver_core driver(run.programs, data, {}, first, options.resume_samples);
  std::string failure;
  auto fail = [&](const std::string& why) {
    if (failure.empty()) failure = why;
  };

  int sender = -1;  // the rank whose sink is called
  auto route = [&](outgoing o) {
    switch (o.to.kind) {
      case endpoint_kind::rank: links[{sender, o.to.index}].push_back(std::move(o.msg)); break;
      case endpoint_kind::reducer: {
        auto& req = std::get<reduce_request>(o.msg);
        auto it = reducers.find(req.stage);
        if (it == reducers.end())
          it = reducers.try_emplace(req.stage, req.stage, members, s.params.reduce,
                                    gpu_reduce_device(run, req.stage)).first;
        auto done = it->second.add(std::move(req));
        if (!done) return fail(done.message());
        if (*done)
          for (int j = 0; j < members; ++j) {
            const int stage = s.member_stage(j, it->first);  // member j's copy
            if ((**done)[static_cast<std::size_t>(j)].sum)  // p2p answers some replicas only
              links[{-2 - it->first, s.rank_of(s.member_replica(j), s.device_of[stage])}].push_back(
                  std::move((**done)[static_cast<std::size_t>(j)]));
          }
        break;
      }
      case endpoint_kind::driver: {
        std::vector<outgoing> answers;
        if (status st = driver.receive(std::move(o.msg), answers); !st) return fail(st.message());
        for (outgoing& a : answers) links[{-1, a.to.index}].push_back(std::move(a.msg));
        break;
      }
      case endpoint_kind::tracer: break;
    }
  };

  std::vector<std::unique_ptr<stage_executor<T>>> ranks;
  std::vector<param_set> parts;
  if (!resuming) {
    auto cut = split_params(initial, run.boundaries);
    if (!cut) return cut.err();
    parts = std::move(*cut);
  }
  for (int r = 0; r < s.ranks(); ++r) {
    executor_setup su = rank_setup(run, r);
    su.threads = options.threads;
    su.record_trace = false;
    su.fault = options.fault;
    auto sink = [&, r](outgoing o) {
      sender = r;
      route(std::move(o));
    };
    try {
      if (resuming) {
        ranks.push_back(std::make_unique<stage_executor<T>>(
            mdl, std::move(su), std::move(options.resume[static_cast<std::size_t>(r)]), sink));
      } else {
        std::vector<param_set> mine;
        for (int st = 0; st < S; ++st)
          if (s.device_of[st] == su.device)
            mine.push_back(parts[static_cast<std::size_t>(s.piece_of(st))].clone());
        ranks.push_back(std::make_unique<stage_executor<T>>(mdl, std::move(su), std::move(mine), sink));
      }
    } catch (const std::exception& e) {
      return make_error(exception_text(e));
    }
  }
  auto step_rank = [&](int r) -> status {
    auto done = ranks[r]->run();
    if (!done) return done.err();
    for (rank_state& snap : ranks[r]->take_snapshots()) {
      if (status st = driver.file_written(r, snap.step); !st) return st;
      if (options.on_snapshot) options.on_snapshot(std::move(snap));
    }
    for (std::int64_t n : driver.due_checkpoints()) out.checkpoints_due.push_back(n);
    if (!failure.empty()) return make_error(failure);
    return {};
  };
  for (int r = 0; r < s.ranks(); ++r) ranks[r]->start();
  if (!failure.empty()) return make_error(failure);
  for (int r = 0; r < s.ranks(); ++r)
    if (status st = step_rank(r); !st) return make_error(st.message());

  std::mt19937_64 rng(options.order_seed);
  for (;;) {
    std::vector<std::pair<int, int>> ready;
    for (const auto& [link, q] : links)
      if (!q.empty()) ready.push_back(link);
    if (ready.empty()) break;
    std::size_t pick = 0;
    if (options.order_seed != 0)
      pick = std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng);
    auto& q = links[ready[pick]];
    message msg = std::move(q.front());
    q.pop_front();
    const int r = ready[pick].second;
    ranks[r]->deliver(std::move(msg));
    if (status st = step_rank(r); !st) return make_error(st.message());
  }
  std::string stuck;
  for (auto& e : ranks)
    if (!e->finished()) stuck += "\n  rank " + std::to_string(e->rank()) + " at " + e->waiting_for();
  if (!stuck.empty()) return make_error("run_local: the ranks stopped before the end:" + stuck);
  for (std::int64_t n : driver.due_checkpoints()) out.checkpoints_due.push_back(n);

  out.stages.assign(S, stage_stats{});
  for (int st = 0; st < S; ++st) out.stages[st].stage = st;
  out.replica_weights.resize(static_cast<std::size_t>(w * S));
  for (auto& e : ranks) {
    for (const stage_stats& x : e->stats()) {
      merge_max(out.stages[x.stage], x);
      out.max_buffered = std::max(out.max_buffered, x.peak_buffered);
    }
    for (int st : e->stages())
      out.replica_weights[static_cast<std::size_t>((e->rank() / p) * S + st)] = e->weights(st);
  }
  out.weights.assign(out.replica_weights.begin(), out.replica_weights.begin() + S);
  for (completed_step& c : driver.take_completed()) {
    out.losses.push_back(c.metrics.loss);
    out.steps.push_back(c.metrics);
  }
  if (driver.steps_done() != s.params.steps)
    return make_error("run_local: the programs ended after " + std::to_string(driver.steps_done()) +
                      " complete steps of " + std::to_string(s.params.steps));
  return out;
}

template result<local_run_result> run_local<float>(const model<float>&, const lowered_run&,
                                                   const param_set&, const minibatch_fn&,
                                                   local_run_options);
template result<local_run_result> run_local<double>(const model<double>&, const lowered_run&,
                                                    const param_set&, const minibatch_fn&,
                                                    local_run_options);

}  // namespace pipeworks
