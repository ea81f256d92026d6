// reshard: gathers replica 0's latest weights and each tensor's moments (from its owner under
// ZeRO) by name, checks that nothing was in flight, and builds each rank of the new layout as
// restore expects it, each replica keeping the moments it owns when the new layout is sharded.
#include "runtime/exec/reshard.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <variant>

#include "ops/model/param_split.hpp"
#include "ops/train/zero_shards.hpp"

namespace pipeworks {
namespace {

// One tensor's optimizer state: its moments (empty before its first update) and update count.
struct tensor_moments {
  tensor m, v;
  std::int64_t updates = 0;
};

// Why a rank's state cannot be re-cut (something in flight), or "".
std::string in_flight(const rank_state& r) {
  if (!r.held.empty()) return std::to_string(r.held.size()) + " microbatches between forward and backward";
  if (!r.to_send_f.empty() || !r.to_send_b.empty()) return "activations or gradients to send";
  // Credits coming back are no state at a step boundary: every message of the step was used,
  // so every link's window is whole again, as the new layout's ranks start.
  for (const message& msg : r.deliver)
    if (!std::holds_alternative<credit_msg>(msg)) return "activations or gradients in flight";
  if (!r.losses.empty()) return "losses of an unfinished step";
  for (const stage_state& s : r.stages) {
    if (s.grads) return "a partial gradient of stage " + std::to_string(s.stage);
    if (s.versions.size() != 1 || !s.versions.count(s.latest))
      return std::to_string(s.versions.size()) + " weight versions of stage " + std::to_string(s.stage);
  }
  return "";
}

// The replicas a run shards each stage's optimizer state over (ZeRO), or 1 when it keeps every
// moment on every replica; as the executor decides it (runtime.zero and the schedule's w).
int shard_replicas(const lowered_run& run) {
  if (!run.programs || run.plan.zero <= 0) return 1;
  return std::max(1, run.programs->params.replicas);
}

// The replica that alone holds a stage's moments under cyclic's p2p reduce (the chain's last,
// which alone updates), or -1 when the run reduces collectively.
int p2p_updater(const lowered_run& run) {
  if (!run.programs || run.programs->params.reduce != reduce_mode::p2p) return -1;
  return run.programs->params.replicas - 1;
}

// The replica rank r of the run is (rank = replica * p + device; 0 for none).
int replica_of(const lowered_run& run, int r) {
  return run.programs ? r / std::max(1, run.programs->params.stages) : 0;
}

}  // namespace

template <class T>
result<std::vector<rank_state>> reshard(const model<T>& m, const lowered_run& from_run,
                                        const std::vector<rank_state>& from, const lowered_run& to) {
  if (from.empty()) return make_error("the checkpoint has no ranks");
  const std::int64_t step = from.front().step;
  const int from_stages = static_cast<int>(from_run.boundaries.size()) - 1;
  const int from_shards = shard_replicas(from_run), to_shards = shard_replicas(to);
  param_set whole = m.init_params(1);
  std::map<std::string, tensor_moments> moments;
  std::vector<bool> got(whole.entries().size(), false), got_moments(whole.entries().size(), false);
  for (const rank_state& r : from) {
    const std::string who = "rank " + std::to_string(r.rank) + " of the checkpoint";
    if (r.step != step)
      return make_error(who + " is at step " + std::to_string(r.step) + ", rank " +
                        std::to_string(from.front().rank) + " at step " + std::to_string(step));
    if (const std::string why = in_flight(r); !why.empty())
      return make_error(who + " holds " + why + ": only a checkpoint at a step boundary (a flush "
                        "schedule's, or --schedule none's) can be re-cut");
    for (const stage_state& s : r.stages) {
      // dualpipe's copies on its second route hold the weights and moments of route 0's stages.
      const int routes = from_run.programs ? from_run.programs->routes : 1;
      if (s.stage >= from_stages && s.stage < routes * from_stages) continue;
      if (s.stage < 0 || s.stage >= from_stages)
        return make_error(who + " holds stage " + std::to_string(s.stage) + " of " +
                          std::to_string(from_stages));
      if (s.latest != step)
        return make_error(who + ": stage " + std::to_string(s.stage) + " made " +
                          std::to_string(s.latest) + " weight versions in " + std::to_string(step) +
                          " steps");
      const param_set& w = *s.versions.at(s.latest);
      const auto& entries = w.entries();
      // Under ZeRO only the owner's moments are the tensor's, under the p2p reduce only the last
      // replica's; otherwise every replica's are.
      const int updater = p2p_updater(from_run);
      const std::vector<int> owners =
          updater >= 0 ? std::vector<int>(entries.size(), updater) : shard_owners(w, from_shards);
      const int replica = from_shards > 1 || updater >= 0 ? replica_of(from_run, r.rank) : 0;
      if (s.moment1.size() != entries.size() || s.moment2.size() != entries.size() ||
          s.updates.size() != entries.size())
        return make_error(who + ": stage " + std::to_string(s.stage) + "'s optimizer state covers " +
                          std::to_string(s.updates.size()) + " of its " +
                          std::to_string(entries.size()) + " tensors");
      for (std::size_t e = 0; e < entries.size(); ++e) {
        const auto& all = whole.entries();
        const auto at = std::find_if(all.begin(), all.end(),
                                     [&](const param_entry& x) { return x.name == entries[e].name; });
        if (at == all.end() || at->shape != entries[e].shape)
          return make_error(who + " holds " + entries[e].name + ", which the model does not have "
                            "with shape " + shape_string(entries[e].shape));
        const auto i = static_cast<std::size_t>(at - all.begin());
        if (!got[i]) {  // else another replica's copy: the same bits at a step boundary
          got[i] = true;
          const auto src = w.values<T>(entries[e]);
          std::copy(src.begin(), src.end(), whole.values<T>(*at).begin());
        }
        if (got_moments[i] || owners[e] != replica) continue;
        got_moments[i] = true;
        moments[at->name] = tensor_moments{s.moment1[e].clone(), s.moment2[e].clone(), s.updates[e]};
      }
    }
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!got[i]) return make_error("no rank of the checkpoint holds " + whole.entries()[i].name);
    if (!got_moments[i])
      return make_error("no rank of the checkpoint holds the optimizer moments of " +
                        whole.entries()[i].name + " (its owner's rank file under ZeRO)");
  }

  auto cut = split_params(whole, to.boundaries);
  if (!cut) return cut.err();
  const int ranks = to.ranks();
  // F's of a stage per replica and step (dualpipe: per route, half the step's)
  const int per_step = to.programs ? to.programs->params.microbatches : to.plan.train.microbatches;
  std::vector<rank_state> out(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    rank_state& rs = out[static_cast<std::size_t>(r)];
    rs.rank = r;
    rs.step = step;
    rs.pc = to.programs ? static_cast<std::int64_t>(position_after_step(
                              to.programs->programs.at(static_cast<std::size_t>(r)), step))
                        : 0;
    const int device = to.programs ? r % to.plan.stages : 0;
    // Every virtual stage, dualpipe's copies on its second route cut as their stage of the model.
    const int virtual_stages =
        to.programs ? to.programs->virtual_stages : static_cast<int>(to.boundaries.size()) - 1;
    for (int s = 0; s < virtual_stages; ++s) {
      if (to.programs && to.programs->device_of[static_cast<std::size_t>(s)] != device) continue;
      const param_set& w = (*cut)[static_cast<std::size_t>(to.programs ? to.programs->piece_of(s) : s)];
      stage_state ss;
      ss.stage = s;
      ss.latest = static_cast<int>(step);
      ss.forwards_done = to.programs ? step * per_step : 0;
      // A sharded replica keeps its own tensors' moments; the others' it never had (no moments,
      // no updates), as stage_optimizer::own_only leaves them in a run.
      const std::vector<bool> mine = owned_by(shard_owners(w, to_shards),
                                              to_shards > 1 ? replica_of(to, r) : 0);
      for (std::size_t e = 0; e < w.entries().size(); ++e) {
        if (!mine[e]) {
          ss.moment1.emplace_back();
          ss.moment2.emplace_back();
          ss.updates.push_back(0);
          continue;
        }
        const tensor_moments& tm = moments.at(w.entries()[e].name);
        ss.moment1.push_back(tm.m.clone());
        ss.moment2.push_back(tm.v.clone());
        ss.updates.push_back(tm.updates);
      }
      ss.versions[ss.latest] = std::make_shared<const param_set>(w.clone());
      rs.stages.push_back(std::move(ss));
    }
  }
  return out;
}

template result<std::vector<rank_state>> reshard<float>(const model<float>&, const lowered_run&,
                                                        const std::vector<rank_state>&,
                                                        const lowered_run&);
template result<std::vector<rank_state>> reshard<double>(const model<double>&, const lowered_run&,
                                                         const std::vector<rank_state>&,
                                                         const lowered_run&);

}  // namespace pipeworks
