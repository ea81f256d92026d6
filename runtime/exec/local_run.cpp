// run_local: all ranks of a pipeline on one thread, messages delivered FIFO or in random order.
#include "runtime/exec/local_run.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include "ops/model/param_split.hpp"
#include "runtime/exec/data_split.hpp"
#include "runtime/exec/reducer.hpp"

namespace pipeworks {

template <class T>
result<local_run_result> run_local(const model<T>& mdl, std::shared_ptr<const schedule> plan,
                                   const std::vector<int>& boundaries, const param_set& initial,
                                   const train_config& cfg, const minibatch_fn& data,
                                   const local_run_options& options) {
  const schedule& s = *plan;
  const int p = s.params.stages, m = s.params.microbatches, w = s.params.replicas;
  const int S = s.virtual_stages;
  auto parts = split_params(initial, boundaries);
  if (!parts) return parts.err();

  local_run_result out;
  out.credit_window = options.credit_window > 0 ? options.credit_window : min_credit_window(s);
  std::deque<std::pair<int, message>> mail;  // (rank, message) not yet delivered
  std::map<int, gradient_reducer> reducers;
  std::map<int, std::vector<std::vector<microbatch>>> dealt;  // step -> [replica][k]
  std::vector<double> loss_sum(static_cast<std::size_t>(s.params.steps), 0.0);
  std::string failure;

  auto route = [&](outgoing o) {
    switch (o.to.kind) {
      case endpoint_kind::rank: mail.emplace_back(o.to.index, std::move(o.msg)); break;
      case endpoint_kind::reducer: {
        auto& req = std::get<reduce_request>(o.msg);
        auto it = reducers.try_emplace(req.stage, req.stage, w).first;
        auto done = it->second.add(std::move(req));
        if (!done) {
          failure = done.message();
          break;
        }
        if (*done)
          for (int r = 0; r < w; ++r)
            mail.emplace_back(s.rank_of(r, s.device_of[it->first]), std::move((**done)[r]));
        break;
      }
      case endpoint_kind::driver:
        if (auto* req = std::get_if<input_request>(&o.msg)) {
          const int t = req->microbatch / m;
          if (!dealt.count(t)) {
            auto mb = data(t);
            if (!mb) {
              failure = mb.message();
              break;
            }
            auto d = deal_microbatches(*mb, w, m);
            if (!d) {
              failure = d.message();
              break;
            }
            dealt[t] = std::move(*d);
          }
          microbatch& u = dealt[t][req->replica][req->microbatch % m];
          mail.emplace_back(s.rank_of(req->replica, s.device_of[0]),
                            activation_msg{req->replica, 0, req->microbatch, -1,
                                           std::move(u.input), std::move(u.ctx)});
        } else if (auto* l = std::get_if<loss_report>(&o.msg)) {
          loss_sum.at(l->microbatch / m) += l->loss;
        }
        break;
      case endpoint_kind::tracer: break;
    }
  };

  std::vector<std::unique_ptr<stage_executor<T>>> ranks;
  for (int r = 0; r < s.ranks(); ++r) {
    executor_setup su;
    su.plan = plan;
    su.replica = r / p;
    su.device = r % p;
    su.boundaries = boundaries;
    su.train = cfg;
    su.credit_window = out.credit_window;
    su.record_trace = false;
    su.fault = options.fault;
    std::vector<param_set> mine;
    for (int st = 0; st < S; ++st)
      if (s.device_of[st] == su.device) mine.push_back((*parts)[st].clone());
    ranks.push_back(std::make_unique<stage_executor<T>>(mdl, std::move(su), std::move(mine), route));
  }
  auto step_rank = [&](int r) -> status {
    auto done = ranks[r]->run();
    if (!done) return done.err();
    if (!failure.empty()) return make_error(failure);
    return {};
  };
  for (auto& e : ranks) e->start();
  for (int r = 0; r < s.ranks(); ++r)
    if (status st = step_rank(r); !st) return make_error(st.message());

  std::mt19937_64 rng(options.order_seed);
  while (!mail.empty()) {
    std::size_t pick = 0;
    if (options.order_seed != 0) pick = std::uniform_int_distribution<std::size_t>(0, mail.size() - 1)(rng);
    auto [r, msg] = std::move(mail[pick]);
    mail.erase(mail.begin() + static_cast<std::ptrdiff_t>(pick));
    ranks[r]->deliver(std::move(msg));
    if (status st = step_rank(r); !st) return make_error(st.message());
  }
  std::string stuck;
  for (auto& e : ranks)
    if (!e->finished()) stuck += "\n  rank " + std::to_string(e->rank()) + " at " + e->waiting_for();
  if (!stuck.empty()) return make_error("run_local: the ranks stopped before the end:" + stuck);

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
  for (double l : loss_sum) out.losses.push_back(l / (m * w));
  return out;
}

template result<local_run_result> run_local<float>(const model<float>&, std::shared_ptr<const schedule>,
                                                   const std::vector<int>&, const param_set&,
                                                   const train_config&, const minibatch_fn&,
                                                   const local_run_options&);
template result<local_run_result> run_local<double>(const model<double>&, std::shared_ptr<const schedule>,
                                                    const std::vector<int>&, const param_set&,
                                                    const train_config&, const minibatch_fn&,
                                                    const local_run_options&);

}  // namespace pipeworks
