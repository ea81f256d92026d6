// restart_at_newest: each stage of an asynchronous checkpoint keeps its newest weight version and
// optimizer state; what was in flight at the cut is dropped and recorded.
#include "runtime/exec/restart_async.hpp"

#include <string>
#include <variant>

namespace pipeworks {

result<restarted_checkpoint> restart_at_newest(std::vector<rank_state> from) {
  if (from.empty()) return make_error("the checkpoint has no ranks");
  restarted_checkpoint out;
  out.step = from.front().step;
  for (rank_state& r : from) {
    const std::string who = "rank " + std::to_string(r.rank) + " of the checkpoint";
    if (r.step != out.step)
      return make_error(who + " is at step " + std::to_string(r.step) + ", rank " +
                        std::to_string(from.front().rank) + " at step " + std::to_string(out.step));
    restart_drop d;
    d.rank = r.rank;
    for (const held_state& h : r.held) d.microbatches.push_back({h.stage, h.microbatch, h.version});
    d.messages = static_cast<int>(r.to_send_f.size() + r.to_send_b.size());
    for (const message& msg : r.deliver)  // credits are no state: the new ranks start whole
      if (!std::holds_alternative<credit_msg>(msg)) ++d.messages;
    d.losses = static_cast<int>(r.losses.size());
    rank_state kept;
    kept.rank = r.rank;
    kept.step = r.step;
    kept.pc = r.pc;
    for (stage_state& s : r.stages) {
      if (s.latest != out.step)
        return make_error(who + ": stage " + std::to_string(s.stage) + " had made " +
                          std::to_string(s.latest) + " weight versions at its cut after step " +
                          std::to_string(out.step) + "; a restart takes each stage's version " +
                          std::to_string(out.step));
      const auto newest = s.versions.find(s.latest);
      if (newest == s.versions.end() || !newest->second)
        return make_error(who + ": stage " + std::to_string(s.stage) + " does not hold its newest "
                          "weight version " + std::to_string(s.latest));
      for (const auto& [v, w] : s.versions)
        if (v != s.latest) d.versions.emplace_back(s.stage, v);
      if (s.grads) d.partial_gradients.push_back(s.stage);
      stage_state k;
      k.stage = s.stage;
      k.latest = s.latest;
      k.forwards_done = s.forwards_done;  // reshard positions the new layout's ranks itself
      k.versions[s.latest] = newest->second;
      k.moment1 = std::move(s.moment1);
      k.moment2 = std::move(s.moment2);
      k.updates = std::move(s.updates);
      kept.stages.push_back(std::move(k));
    }
    out.states.push_back(std::move(kept));
    out.dropped.push_back(std::move(d));
  }
  return out;
}

nlohmann::json restart_record(const restarted_checkpoint& r, std::string_view from_schedule) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const restart_drop& d : r.dropped) {
    if (d.microbatches.empty() && d.versions.empty() && d.messages == 0 &&
        d.partial_gradients.empty() && d.losses == 0)
      continue;
    nlohmann::json held = nlohmann::json::array(), versions = nlohmann::json::array();
    for (const auto& h : d.microbatches)
      held.push_back({{"stage", h.stage}, {"microbatch", h.microbatch}, {"version", h.version}});
    for (const auto& [stage, v] : d.versions) versions.push_back({{"stage", stage}, {"version", v}});
    ranks.push_back({{"rank", d.rank},
                     {"microbatches", std::move(held)},
                     {"weight_versions", std::move(versions)},
                     {"messages", d.messages},
                     {"partial_gradients", d.partial_gradients},
                     {"losses", d.losses}});
  }
  return {{"from_schedule", std::string(from_schedule)},
          {"step", r.step},
          {"kept", "each stage's version " + std::to_string(r.step) +
                       " (its newest), optimizer moments and update counts"},
          {"dropped", std::move(ranks)}};
}

}  // namespace pipeworks
