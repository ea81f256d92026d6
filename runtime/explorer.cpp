// The explorer's data: pairs every timeline event with what it waited for (program_walk's
// describe_action, the SEND/RECV flows), its version and rule, and sweeps the events in time
// order for each rank's state (stashed microbatches, live versions, bytes, waiting RECVs).
#include "runtime/explorer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/program_walk.hpp"

namespace pipeworks {
namespace {

using nlohmann::json;

std::string text_of(const action& a) { return to_string(a); }

// What the explorer knows besides the timeline: the schedule (a skeleton for a trace: stages,
// devices and replicas only), its version rule and the bytes of each stage.
struct context {
  const schedule* s = nullptr;
  bool measured = false;
  // Per virtual stage: a simulation's from its costs; for a trace, param_bytes from the bytes its
  // STEPs recorded, and each stash's bytes are its F's own (timeline_event::bytes).
  std::vector<std::int64_t> act_bytes, param_bytes;
  // Whether the bytes are known: always for a simulation (zeros when its costs give none); for a
  // trace, the stashes' when every F recorded its bytes, the versions' when every stage that ran
  // a forward has a STEP that recorded its version's bytes.
  bool stash_known = true, versions_known = true;
};

// (replica, stage, microbatch, what): the index of the event that made or consumed something.
using key = std::tuple<int, int, int, int>;
enum what { fwd_made = 0, bwd_made = 1, recv_fwd = 2, recv_bwd = 3, step_at = 4 };

std::string message_text(const message_id& m) {
  return std::string(m.link.forward ? "the activation" : "the gradient") + " of microbatch " +
         std::to_string(m.microbatch) + " for stage " + std::to_string(m.link.stage);
}

struct builder {
  const context& c;
  const timeline& t;
  int p = 1;
  std::vector<std::size_t> order;  // event indices by start, ties in the timeline's order
  std::vector<int> id_of;          // event index -> action id (its position in `order`)
  std::map<key, int> made;         // (replica, stage, mb, what) -> action id
  std::unordered_map<std::int64_t, int> send_of, recv_of;  // flow id -> action id

  int rank_of_id(int id) const { return t.events[order[id]].rank; }

  void index() {
    order.resize(t.events.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const auto& x = t.events[a];
      const auto& y = t.events[b];
      return x.start < y.start;  // ties keep the simulator's order, which is causal
    });
    id_of.assign(order.size(), 0);
    for (std::size_t i = 0; i < order.size(); ++i) {
      id_of[order[i]] = static_cast<int>(i);
      const auto& e = t.events[order[i]];
      const int rep = e.rank / p, st = e.act.stage, mb = e.act.microbatch, id = static_cast<int>(i);
      switch (e.act.kind) {
        case action_kind::forward: made[{rep, st, mb, fwd_made}] = id; break;
        case action_kind::backward:
        case action_kind::input_grad: made[{rep, st, mb, bwd_made}] = id; break;
        case action_kind::recv_f: made[{rep, st, mb, recv_fwd}] = id; break;
        case action_kind::recv_b: made[{rep, st, mb, recv_bwd}] = id; break;
        default: break;
      }
      if (e.flow_id >= 0) {
        if (e.act.kind == action_kind::send_f || e.act.kind == action_kind::send_b)
          send_of[e.flow_id] = id;
        if (e.act.kind == action_kind::recv_f || e.act.kind == action_kind::recv_b)
          recv_of[e.flow_id] = id;
      }
    }
  }

  int find(const key& k) const {
    const auto it = made.find(k);
    return it == made.end() ? -1 : it->second;
  }

  json ref(const std::string& text, int from_rank, int action_id) const {
    return json{{"text", text}, {"rank", from_rank}, {"action", action_id}};
  }

  // What event `e` waited for, by describe_action.
  json waited(const timeline_event& e, int reduces_before) const {
    const int rep = e.rank / p;
    const action_flow f = describe_action(*c.s, c.s->lowered, rep, e.act, reduces_before);
    switch (f.waits) {
      case wait_kind::nothing:
        if (e.act.kind == action_kind::weight_grad)
          return ref("nothing: the input gradient I of microbatch " +
                         std::to_string(e.act.microbatch) + " ran before it on this rank",
                     e.rank, find({rep, e.act.stage, e.act.microbatch, bwd_made}));
        if (e.act.kind == action_kind::backward || e.act.kind == action_kind::input_grad)
          return ref("nothing from another rank: the last stage starts the backward from its own "
                     "forward's stash",
                     e.rank, find({rep, e.act.stage, e.act.microbatch, fwd_made}));
        return ref("nothing: it runs as soon as the rank reaches it", -1, -1);
      case wait_kind::input:
        return ref("the driver's input for microbatch " + std::to_string(f.awaited.microbatch),
                   -1, -1);
      case wait_kind::message: {
        const message_id& m = f.awaited;
        if (e.act.kind == action_kind::recv_f || e.act.kind == action_kind::recv_b) {
          const auto it = e.flow_id >= 0 ? send_of.find(e.flow_id) : send_of.end();
          if (it == send_of.end()) return ref(message_text(m) + " (its SEND is not in the timeline)", -1, -1);
          return ref(message_text(m) + ", sent by " + text_of(t.events[order[it->second]].act) +
                         " on rank " + std::to_string(rank_of_id(it->second)),
                     rank_of_id(it->second), it->second);
        }
        // Read from this rank: what its RECV took in, or what the stage on the same device made.
        const int recv = find({rep, m.link.stage, m.microbatch, m.link.forward ? recv_fwd : recv_bwd});
        if (recv >= 0) {
          const auto& r = t.events[order[recv]];
          const auto it = r.flow_id >= 0 ? send_of.find(r.flow_id) : send_of.end();
          const int from = it == send_of.end() ? -1 : rank_of_id(it->second);
          return ref(message_text(m) + ", received by " + text_of(r.act) +
                         (from >= 0 ? " from rank " + std::to_string(from) : std::string()),
                     from, recv);
        }
        const int producer = m.link.forward ? m.link.stage - 1 : m.link.stage + 1;
        const int id = find({rep, producer, m.microbatch, m.link.forward ? fwd_made : bwd_made});
        return ref(message_text(m) + ", made on this rank by " +
                       (id >= 0 ? text_of(t.events[order[id]].act) : std::string("stage ") +
                                                                          std::to_string(producer)),
                   e.rank, id);
      }
      case wait_kind::credit: {
        const bool fwd = e.act.kind == action_kind::send_f;
        const int id = find({rep, e.act.stage, e.act.microbatch, fwd ? fwd_made : bwd_made});
        return ref(std::string("its data, made by ") +
                       (id >= 0 ? text_of(t.events[order[id]].act) : std::string("its stage")) +
                       " on this rank" +
                       (c.measured ? std::string() : ", and a free send stream (one message at a time)"),
                   e.rank, id);
      }
      case wait_kind::reduce:
        if (c.s->params.reduce == reduce_mode::p2p)  // cyclic's chain of partial sums
          return ref(rep == 0 ? std::string("nothing: replica 0 starts the chain of partial sums")
                              : "the partial sum of replica " + std::to_string(rep - 1) +
                                    "'s REDUCE " + std::to_string(f.reduce.occurrence) +
                                    " of stage " + std::to_string(f.reduce.stage),
                     -1, -1);
        return ref("every replica of stage " + std::to_string(f.reduce.stage) + " at its REDUCE " +
                       std::to_string(f.reduce.occurrence),
                   -1, -1);
      case wait_kind::version:
        return ref("the new version of stage " + std::to_string(f.reduce.stage) +
                       " from the last replica's STEP (the p2p reduce)",
                   -1, -1);
    }
    return nullptr;
  }

  // What event `e` sent, for a SEND; null otherwise.
  json sent(const timeline_event& e) const {
    if (e.act.kind != action_kind::send_f && e.act.kind != action_kind::send_b) return nullptr;
    const bool fwd = e.act.kind == action_kind::send_f;
    const message_id m{{e.rank / p, fwd ? e.act.stage + 1 : e.act.stage - 1, fwd}, e.act.microbatch};
    const auto it = e.flow_id >= 0 ? recv_of.find(e.flow_id) : recv_of.end();
    if (it == recv_of.end()) return ref(message_text(m) + " (its RECV is not in the timeline)", -1, -1);
    return ref(message_text(m) + " to rank " + std::to_string(rank_of_id(it->second)) +
                   ", taken in by " + text_of(t.events[order[it->second]].act),
               rank_of_id(it->second), it->second);
  }

  // The version's rule, for F, B, I and W.
  std::string rule(const timeline_event& e) const {
    if (e.version < 0) return "";
    if (c.measured)
      return "version " + std::to_string(e.version) + " as the run recorded it" +
             (t.version_rule.empty() ? std::string() : ", by the rule: " + t.version_rule);
    const version_use& v = c.s->versions[e.act.stage][e.act.microbatch];
    return "versions[" + std::to_string(e.act.stage) + "][" + std::to_string(e.act.microbatch) +
           "] = {forward " + std::to_string(v.forward) + ", backward " +
           std::to_string(v.backward) + "}, by the rule: " + c.s->version_rule;
  }
};

// The critical path: from the action that ends last, back through what each action started
// after: the latest-ending of the previous action on each of its rank's streams and the action
// it waited for, among those that ended by its start (1e-9 relative slack). Where they tie, the
// one it waited for, so that the path crosses ranks where a message held it up; a RECV that
// waited follows its SEND, which decided when it ended. Ids in time order.
json critical_path(const timeline& t, const builder& b, const json& actions) {
  const std::size_t n = b.order.size();
  if (n == 0) return json::array();
  std::vector<int> pred(n, -1);
  std::vector<std::array<int, 3>> last(t.ranks, {-1, -1, -1});  // per rank, per stream
  std::size_t final_id = 0;
  for (std::size_t id = 0; id < n; ++id) {
    const auto& e = t.events[b.order[id]];
    const double by = e.start + 1e-9 * std::max(1.0, std::abs(e.start));
    double best = -1.0;
    const auto consider = [&](int cand) {
      if (cand < 0 || static_cast<std::size_t>(cand) == id) return;
      const double end = t.events[b.order[cand]].end;
      if (end <= by && end > best) {
        best = end;
        pred[id] = cand;
      }
    };
    const json& waited = actions[id]["waited"];
    const int sender = waited.is_object() ? waited["action"].get<int>() : -1;
    if (e.stream == stream_kind::recv && e.end > by && sender >= 0) {
      pred[id] = sender;  // a RECV that waited ended when its message came: the SEND held it up
    } else {
      consider(sender);
      for (int c : last[e.rank]) consider(c);
    }
    last[e.rank][static_cast<int>(e.stream)] = static_cast<int>(id);
    if (e.end > t.events[b.order[final_id]].end) final_id = id;
  }
  // A trace's own times decide the links; a hostile or broken one can make them a cycle (a RECV
  // "sent" by a SEND that ends after it), so the walk stops at an action it has passed.
  std::vector<int> path;
  std::vector<char> passed(n, 0);
  for (int at = static_cast<int>(final_id); at >= 0 && !passed[at]; at = pred[at]) {
    passed[at] = 1;
    path.push_back(at);
  }
  return json(std::vector<int>(path.rbegin(), path.rend()));
}

// One rank's state while the sweep passes its events.
struct rank_state {
  std::map<std::pair<int, int>, int> stashed;  // (stage, mb) -> the version its F used
  std::map<int, int> newest;                   // stage -> its newest version
  std::set<std::size_t> waiting;               // RECVs not yet ended (indices of the whole timeline)
  std::map<std::pair<int, int>, std::int64_t> held_bytes;  // (stage, mb) -> its stash's bytes
  int peak_stashed = 0, peak_versions = 1;
  std::int64_t peak_bytes = 0, peak_stash_bytes = 0;
};

// What one page shows of a timeline: some of its events, and the times its states cover.
struct page_span {
  std::vector<std::size_t> shown;  // indices into the whole timeline's events
  double from = 0.0;               // the first state: everything up to this time applied
  double to = std::numeric_limits<double>::infinity();  // the last state's time at most
  bool to_exclusive = false;       // states before `to` only (a page cut at `to`)
};

// The events' indices by start time, ties in the timeline's order (the simulator's, causal).
std::vector<std::size_t> by_start(const std::vector<timeline_event>& events) {
  std::vector<std::size_t> order(events.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return events[a].start < events[b].start;
  });
  return order;
}

json build(const context& c, const timeline& whole, const page_span& span, int p,
           double makespan, double bubble, const std::vector<rank_stats>* stats, std::string note,
           json window) {
  timeline t;  // the page's events
  t.title = whole.title;
  t.version_rule = whole.version_rule;
  t.ranks = whole.ranks;
  t.devices_per_replica = whole.devices_per_replica;
  t.events.reserve(span.shown.size());
  for (std::size_t i : span.shown) t.events.push_back(whole.events[i]);
  builder b{c, t, p, {}, {}, {}, {}, {}};
  b.index();
  const int ranks = t.ranks;
  // Over the whole timeline: the REDUCEs of each rank and stage before each event, and the
  // release of each stash (its B, or its W when the backward is split).
  const std::vector<std::size_t> whole_order = by_start(whole.events);
  std::vector<int> reduces_before(whole.events.size(), 0);
  std::map<std::pair<int, int>, int> reduces;  // (rank, stage) -> REDUCEs so far
  std::map<key, double> release;
  std::map<key, std::int64_t> left_for_w;  // the bytes each W recorded: what its I left
  for (std::size_t i : whole_order) {
    const auto& e = whole.events[i];
    int& n = reduces[{e.rank, e.act.stage}];
    reduces_before[i] = n;
    if (e.act.kind == action_kind::reduce) ++n;
    if (e.act.kind == action_kind::backward || e.act.kind == action_kind::weight_grad)
      release[{e.rank, e.act.stage, e.act.microbatch, 0}] = e.end;
    if (e.act.kind == action_kind::weight_grad && e.bytes >= 0)
      left_for_w[{e.rank, e.act.stage, e.act.microbatch, 0}] = e.bytes;
  }
  std::vector<int> page_id(whole.events.size(), -1);  // whole index -> action id on the page
  for (std::size_t id = 0; id < b.order.size(); ++id)
    page_id[span.shown[b.order[id]]] = static_cast<int>(id);

  json actions = json::array();
  std::vector<int> per_rank(ranks, 0);
  for (std::size_t id = 0; id < b.order.size(); ++id) {
    const auto& e = t.events[b.order[id]];
    ++per_rank[e.rank];
    json a{{"id", id},
           {"rank", e.rank},
           {"stream", stream_name(e.stream)},
           {"text", text_of(e.act)},
           {"kind", kind_name(e.act.kind)},
           {"stage", e.act.stage},
           {"microbatch", has_microbatch(e.act.kind) ? e.act.microbatch : -1},
           {"start", e.start},
           {"end", e.end},
           {"version", e.version},
           {"waited", b.waited(e, reduces_before[span.shown[b.order[id]]])},
           {"sent", b.sent(e)},
           {"rule", b.rule(e)}};
    actions.push_back(std::move(a));
  }
  const json critical = critical_path(t, b, actions);

  // The sweep over the whole timeline: changes at each time, applied together; a snapshot of
  // every rank at `from` (all that happened by then applied) and after each later time with
  // changes, up to `to`. Waiting RECVs the page does not show are left out of its snapshots.
  struct change {
    double time;
    int order;  // removals before additions at one time
    std::size_t event;
    bool add;
    std::int64_t resize = -1;  // >= 0: the event's stash now holds this many bytes
  };
  std::vector<change> changes;
  for (std::size_t i : whole_order) {
    const auto& e = whole.events[i];
    if (e.act.kind == action_kind::forward) {
      changes.push_back({e.start, 1, i, true});
      const auto it = release.find({e.rank, e.act.stage, e.act.microbatch, 0});
      if (it != release.end()) changes.push_back({it->second, 0, i, false});
    } else if (e.act.kind == action_kind::step) {
      changes.push_back({e.start, 1, i, true});
    } else if (e.stream == stream_kind::recv && e.end > e.start) {
      changes.push_back({e.start, 1, i, true});
      changes.push_back({e.end, 0, i, false});
    }
    // A trace's B or I holds its stash as it recorded (more than the F's when it recomputes it);
    // after an I, the stash is what its W recorded.
    if ((e.act.kind == action_kind::backward || e.act.kind == action_kind::input_grad) &&
        e.bytes >= 0)
      changes.push_back({e.start, 1, i, true, e.bytes});
    if (e.act.kind == action_kind::input_grad) {
      const auto it = left_for_w.find({e.rank, e.act.stage, e.act.microbatch, 0});
      if (it != left_for_w.end()) changes.push_back({e.end, 1, i, true, it->second});
    }
  }
  std::stable_sort(changes.begin(), changes.end(), [](const change& x, const change& y) {
    return x.time != y.time ? x.time < y.time : x.order < y.order;
  });
  std::vector<rank_state> rs(ranks);
  // Bytes the page does not know are null, which it shows as unknown.
  const bool bytes_known = c.stash_known && c.versions_known;
  const auto known = [](bool is, std::int64_t bytes) { return is ? json(bytes) : json(nullptr); };
  auto versions_of = [&](const rank_state& r, std::map<int, std::set<int>>& live) {
    for (const auto& [stage, v] : r.newest) live[stage].insert(v);
    for (const auto& [k, v] : r.stashed) live[k.first].insert(v);
  };
  auto snapshot = [&](double time) {
    json per = json::array();
    for (int r = 0; r < ranks; ++r) {
      rank_state& s = rs[r];
      std::map<int, std::set<int>> live;
      versions_of(s, live);
      std::int64_t stash_bytes = 0;
      json stash = json::array(), vers = json::object();
      int most = 1;
      for (const auto& [k, v] : s.stashed)
        stash.push_back(json{{"stage", k.first}, {"microbatch", k.second}, {"version", v}});
      for (const auto& [k, b] : s.held_bytes) stash_bytes += b;
      std::int64_t bytes = stash_bytes;
      for (const auto& [stage, set] : live) {
        vers[std::to_string(stage)] = std::vector<int>(set.begin(), set.end());
        most = std::max(most, static_cast<int>(set.size()));
        if (stage < static_cast<int>(c.param_bytes.size()))
          bytes += c.param_bytes[stage] * static_cast<std::int64_t>(set.size());
      }
      std::vector<int> wait;
      for (std::size_t i : s.waiting)
        if (page_id[i] >= 0) wait.push_back(page_id[i]);
      std::sort(wait.begin(), wait.end());
      s.peak_stashed = std::max(s.peak_stashed, static_cast<int>(s.stashed.size()));
      s.peak_versions = std::max(s.peak_versions, most);
      s.peak_bytes = std::max(s.peak_bytes, bytes);
      s.peak_stash_bytes = std::max(s.peak_stash_bytes, stash_bytes);
      per.push_back(json{{"stashed", std::move(stash)},
                         {"versions", std::move(vers)},
                         {"bytes", known(bytes_known, bytes)},
                         {"stash_bytes", known(c.stash_known, stash_bytes)},
                         {"waiting", std::move(wait)}});
    }
    return json{{"time", time}, {"ranks", std::move(per)}};
  };
  auto apply = [&](const change& ch) {
    const auto& e = whole.events[ch.event];
    rank_state& s = rs[e.rank];
    const std::pair<int, int> held{e.act.stage, e.act.microbatch};
    if (ch.resize >= 0) {
      if (const auto it = s.held_bytes.find(held); it != s.held_bytes.end()) it->second = ch.resize;
    } else if (e.act.kind == action_kind::forward) {
      if (ch.add) {
        s.stashed[held] = e.version;
        const bool costed = e.act.stage < static_cast<int>(c.act_bytes.size());
        s.held_bytes[held] = e.bytes >= 0 ? e.bytes : costed ? c.act_bytes[e.act.stage] : 0;
      } else {
        s.stashed.erase(held);
        s.held_bytes.erase(held);
      }
      // In a trace the newest version is also at least the latest one a forward used.
      if (c.measured && ch.add) s.newest[e.act.stage] = std::max(s.newest[e.act.stage], e.version);
    } else if (e.act.kind == action_kind::step) {
      ++s.newest[e.act.stage];
    } else if (ch.add) {
      s.waiting.insert(ch.event);
    } else {
      s.waiting.erase(ch.event);
    }
  };
  // The states as deltas, to keep pages small: the first holds every rank ("ranks"), each later
  // one only the ranks whose state changed ("changed": rank -> its state); the page rebuilds them.
  json states = json::array();
  json last;  // the ranks' states as of the state before
  auto push = [&](double time) {
    json full = snapshot(time);
    json& now = full["ranks"];
    if (last.is_null()) {
      last = now;
      states.push_back(std::move(full));
      return;
    }
    json changed = json::object();
    for (int r = 0; r < ranks; ++r) {
      if (now[r] == last[r]) continue;
      changed[std::to_string(r)] = now[r];
      last[r] = std::move(now[r]);
    }
    states.push_back(json{{"time", time}, {"changed", std::move(changed)}});
  };
  // The state before anything ran: version 0 of every stage each rank runs.
  for (const auto& e : whole.events)
    if (e.act.kind == action_kind::forward) rs[e.rank].newest.emplace(e.act.stage, 0);
  std::size_t i = 0;
  for (; i < changes.size() && changes[i].time <= span.from; ++i) apply(changes[i]);
  push(span.from);
  while (i < changes.size()) {
    const double time = changes[i].time;
    if (time > span.to || (span.to_exclusive && time == span.to)) break;
    for (; i < changes.size() && changes[i].time == time; ++i) apply(changes[i]);
    push(time);
  }

  json rank_list = json::array();
  for (int r = 0; r < ranks; ++r) {
    json x{{"rank", r},
           {"replica", r / p},
           {"device", r % p},
           {"actions", per_rank[r]},
           {"peak_stashed", rs[r].peak_stashed},
           {"peak_live_versions", rs[r].peak_versions},
           {"peak_bytes", known(bytes_known, rs[r].peak_bytes)},
           {"peak_stash_bytes", known(c.stash_known, rs[r].peak_stash_bytes)}};
    if (stats && r < static_cast<int>(stats->size())) {
      const rank_stats& st = (*stats)[r];
      x["simulated"] = json{{"busy", st.busy},
                            {"peak_inflight", st.peak_inflight},
                            {"peak_versions", st.peak_versions},
                            {"peak_activation_bytes", st.peak_activation_bytes},
                            {"peak_memory_bytes", st.peak_memory_bytes},
                            {"finish", st.finish}};
    }
    rank_list.push_back(std::move(x));
  }
  json out{{"format", "pipeworks-explorer"},
           {"format_version", 3},
           {"title", t.title},
           {"source", c.measured ? "measured" : "simulated"},
           {"p", p},
           {"ranks", rank_list},
           {"start", span.from},
           {"makespan", makespan},
           {"bubble_fraction", bubble},
           {"version_rule", c.measured ? t.version_rule : c.s->version_rule},
           {"bytes", !c.measured          ? "from the cost model"
                     : bytes_known        ? "as the run recorded them"
                     : c.stash_known      ? "stashes as the run recorded them; versions unknown"
                                          : "unknown: the trace records no sizes"},
           {"actions", std::move(actions)},
           {"critical_path", critical},
           {"states", std::move(states)},
           {"note", std::move(note)},
           {"window", std::move(window)}};
  return out;
}

}  // namespace

result<std::string> explorer_json(const schedule& lowered, const cost_model& costs,
                                  const simulation& sim) {
  const auto n = static_cast<std::int64_t>(sim.trace.events.size());
  if (n > max_explorer_actions)
    return make_error("explorer: the schedule has " + std::to_string(n) +
                      " actions, more than one page shows (" +
                      std::to_string(max_explorer_actions) +
                      "); use fewer stages, microbatches, replicas or steps");
  if (n * lowered.ranks() > max_explorer_cells)
    return make_error("explorer: the schedule has " + std::to_string(n) + " actions on " +
                      std::to_string(lowered.ranks()) + " ranks; a page's states (actions times "
                      "ranks) would pass " + std::to_string(max_explorer_cells) +
                      "; use fewer stages, replicas or microbatches");
  if (n == 0 && sim.actions > 0)
    return make_error("explorer: the simulation has no timeline; simulate with record_timeline");
  context c;
  c.s = &lowered;
  for (int v = 0; v < lowered.virtual_stages; ++v) {
    c.act_bytes.push_back(costs.stage(v).activation_bytes);
    c.param_bytes.push_back(costs.stage(v).param_bytes);
  }
  timeline t = sim.trace;
  t.ranks = lowered.ranks();
  page_span span;
  span.shown.resize(t.events.size());
  for (std::size_t i = 0; i < span.shown.size(); ++i) span.shown[i] = i;
  return build(c, t, span, lowered.params.stages, sim.makespan, sim.bubble_fraction, &sim.ranks,
               "", nullptr)
      .dump();
}

std::vector<int> steps_of(const timeline& t) {
  std::vector<int> step(t.events.size(), 1);
  std::map<std::pair<int, int>, int> done;  // (rank, stage) -> its STEPs so far
  for (std::size_t i : by_start(t.events)) {
    const auto& e = t.events[i];
    int& n = done[{e.rank, e.act.stage}];
    step[i] = n + 1;
    if (e.act.kind == action_kind::step) ++n;
  }
  return step;
}

window_problem check_window(const step_window& w, int steps) {
  using wp = window_problem;
  const auto before_one = [](int s) {
    return "step " + std::to_string(s) + " is before the first step (steps count from 1)";
  };
  const auto past = [&](int s) {
    return "step " + std::to_string(s) + " is past the trace's last step, " + std::to_string(steps);
  };
  if (w.first < 0) return {wp::first, before_one(w.first)};
  if (w.last < 0) return {wp::last, before_one(w.last)};
  if (steps <= 0) return {w.first > 0 ? wp::first : wp::last, "the trace has no steps (no actions)"};
  if (w.first > steps) return {wp::first, past(w.first)};
  if (w.last > steps) return {wp::last, past(w.last)};
  if (w.last > 0 && w.last < std::max(w.first, 1))
    return {wp::last, "step " + std::to_string(w.last) + " is before the window's first step, " +
                          std::to_string(std::max(w.first, 1)) + ": the window would be empty"};
  return {};
}

result<std::string> explorer_json(const timeline& measured, const step_window& window) {
  int ranks = std::max(measured.ranks, 0), stages = 0;
  page_span span;
  for (const auto& e : measured.events) {
    if (e.rank < 0) return make_error("explorer: an event of the trace has rank " + std::to_string(e.rank));
    ranks = std::max(ranks, e.rank + 1);
    stages = std::max(stages, e.act.stage + 1);
    span.from = std::min(span.from, e.start);
  }
  std::string note;
  json window_data = nullptr;
  double window_end = std::numeric_limits<double>::infinity();
  if (window.whole()) {
    span.shown.resize(measured.events.size());
    for (std::size_t i = 0; i < span.shown.size(); ++i) span.shown[i] = i;
  } else {
    // The window: from the first start of its steps' actions to the last end, every action of
    // its steps and every other that runs in that time.
    const std::vector<int> step = steps_of(measured);
    const int steps = step.empty() ? 0 : *std::max_element(step.begin(), step.end());
    const window_problem bad = check_window(window, steps);
    if (bad.end != window_problem::none)
      return make_error(std::string("explorer: the window's ") +
                        (bad.end == window_problem::first ? "first" : "last") + " step: " +
                        bad.message);
    const int first = std::max(window.first, 1), last = window.last > 0 ? window.last : steps;
    const auto in_steps = [&](std::size_t i) { return step[i] >= first && step[i] <= last; };
    double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
    for (std::size_t i = 0; i < step.size(); ++i) {
      if (!in_steps(i)) continue;
      t0 = std::min(t0, measured.events[i].start);
      t1 = std::max(t1, measured.events[i].end);
    }
    for (std::size_t i = 0; i < step.size(); ++i) {
      const auto& e = measured.events[i];
      if (in_steps(i) || (e.end > t0 && e.start < t1)) span.shown.push_back(i);
    }
    span.from = t0;
    span.to = window_end = t1;
    window_data = json{{"from_step", first}, {"to_step", last}, {"steps", steps},
                       {"start", t0}, {"end", t1}};
    note = "steps " + std::to_string(first) + " to " + std::to_string(last) + " of " +
           std::to_string(steps) + ": their actions and what ran beside them; the first state " +
           "holds what the steps before left (stashed microbatches, live versions)";
  }
  const std::int64_t keep = std::max<std::int64_t>(
      1, std::min(max_explorer_actions, max_explorer_cells / std::max(ranks, 1)));
  if (static_cast<std::int64_t>(span.shown.size()) > keep) {
    std::stable_sort(span.shown.begin(), span.shown.end(), [&](std::size_t a, std::size_t b) {
      return measured.events[a].start < measured.events[b].start;
    });
    span.to = measured.events[span.shown[keep]].start;
    span.to_exclusive = true;
    note += (note.empty() ? std::string("the trace has ") : std::string("; the window has ")) +
            std::to_string(span.shown.size()) + " actions; this page shows the first " +
            std::to_string(keep);
    span.shown.resize(keep);
    std::sort(span.shown.begin(), span.shown.end());  // ties in the timeline's order
  }
  const int p = measured.devices_per_replica > 0 ? measured.devices_per_replica : std::max(ranks, 1);
  timeline whole;
  whole.title = measured.title;
  whole.version_rule = measured.version_rule;
  whole.ranks = ranks;
  whole.devices_per_replica = measured.devices_per_replica;
  whole.events = measured.events;
  // A skeleton of the schedule for describe_action: where each stage runs, how many replicas.
  schedule s;
  s.params.stages = p;
  s.params.replicas = std::max(1, (ranks + p - 1) / p);
  s.virtual_stages = std::max(stages, 1);
  s.device_of.assign(s.virtual_stages, 0);
  for (const auto& e : measured.events) s.device_of[e.act.stage] = e.rank % p;
  for (const auto& e : measured.events) s.lowered = s.lowered || is_comm(e.act.kind);
  context c;
  c.s = &s;
  c.measured = true;
  // The bytes the run recorded: each F its stash's, each STEP its new version's (every version of
  // a stage is as large as another).
  c.param_bytes.assign(s.virtual_stages, -1);
  std::vector<bool> ran_forward(s.virtual_stages, false);
  bool any_forward = false;
  for (const auto& e : measured.events) {
    if (e.act.kind == action_kind::forward) {
      any_forward = ran_forward[e.act.stage] = true;
      c.stash_known = c.stash_known && e.bytes >= 0;
    }
    if (e.act.kind == action_kind::step && e.bytes >= 0)
      c.param_bytes[e.act.stage] = std::max(c.param_bytes[e.act.stage], e.bytes);
  }
  c.stash_known = c.stash_known && any_forward;
  for (int v = 0; v < s.virtual_stages; ++v)
    c.versions_known = c.versions_known && (!ran_forward[v] || c.param_bytes[v] >= 0);
  for (std::int64_t& b : c.param_bytes) b = std::max<std::int64_t>(b, 0);  // unknown: the page says so
  // The page's time: from its start to the last end of its actions (a window's end at most);
  // the bubble is the share of that time the ranks' compute streams were idle.
  double end = span.from;
  for (std::size_t i : span.shown) end = std::max(end, measured.events[i].end);
  end = std::min(end, window_end);
  double busy = 0.0;
  for (std::size_t i : span.shown) {
    const auto& e = measured.events[i];
    if (e.stream == stream_kind::compute)
      busy += std::max(0.0, std::min(e.end, end) - std::max(e.start, span.from));
  }
  const double makespan = end - span.from;
  const double bubble = makespan > 0 && ranks > 0 ? 1.0 - busy / (ranks * makespan) : 0.0;
  return build(c, whole, span, p, makespan, bubble, nullptr, note, window_data).dump();
}

result<std::string> explorer_compare_json(const std::string& first, const std::string& second) {
  json a = json::parse(first, nullptr, false), b = json::parse(second, nullptr, false);
  if (a.is_discarded() || !a.is_object()) return make_error("explorer: the first data is not explorer JSON");
  if (b.is_discarded() || !b.is_object()) return make_error("explorer: the compared data is not explorer JSON");
  b.erase("compare");
  a["compare"] = std::move(b);
  return a.dump();
}

std::string explorer_html(const std::string& json_text) {
  static const std::string page =
#include "explorer_template.inc"
      ;
  std::string data;
  data.reserve(json_text.size() + json_text.size() / 16);
  for (std::size_t i = 0; i < json_text.size(); ++i) {
    data += json_text[i];
    if (json_text[i] == '<' && i + 1 < json_text.size() && json_text[i + 1] == '/') data += '\\';
  }
  const std::string marker = "__PIPEWORKS_EXPLORER_DATA__";
  std::string out = page;
  const auto at = out.find(marker);
  if (at != std::string::npos) out.replace(at, marker.size(), data);
  return out;
}

result<std::string> explorer_data_of(const std::string& html) {
  const std::string open = R"(<script type="application/json" id="pipeworks-data">)";
  const auto at = html.find(open);
  if (at == std::string::npos) return make_error("explorer: the page holds no pipeworks data");
  const auto from = at + open.size();
  const auto end = html.find("</script>", from);
  if (end == std::string::npos) return make_error("explorer: the page's data is not closed");
  // "<\/" is JSON's own escape of "/": the text parses as it stands.
  std::string data = html.substr(from, end - from);
  return data;
}

}  // namespace pipeworks
