// The discrete-event simulator's hot loop: one pass over the actions in dependency order, on flat
// per-(replica, stage, microbatch) arrays, with no allocation per action.
#include <algorithm>
#include <cmath>

#include "runtime/simulate_internal.hpp"

namespace pipeworks {
namespace sim_detail {

result<simulation> simulator::run() {
  // A built-in schedule is first run on the bounds its parameters give, checking each action as
  // it runs instead of in a pass of its own over every program. Anything amiss (an action past
  // those bounds, an error, a deadlock) runs it again with the full checks, whose messages are
  // the ones a caller sees.
  fast_ = !s_.custom_programs && s_.params.microbatches >= 1 && s_.params.steps >= 1 &&
          s_.params.chunks >= 1 &&
          static_cast<long long>(s_.params.steps) * s_.params.chunks < (1 << 30);
  if (fast_) {
    auto quick = run_once();
    if (quick) return quick;
    fast_ = false;
    trace_ = timeline{};
    ready_.clear();
    max_id_ = -1;
    versions_.clear();
    error_.clear();
  }
  return run_once();
}

result<simulation> simulator::run_once() {
  if (status st = prepare(); !st) return error{st.message()};
  for (int r = r_ - 1; r >= 0; --r) ready_.push_back(r);
  while (!ready_.empty()) {
    const int r = ready_.back();
    ready_.pop_back();
    if (!advance(r)) return error{error_};
  }
  for (int r = 0; r < r_; ++r) {
    if (hot_[r].pc < s_.programs[r].size()) return error{deadlock_picture()};
  }
  // The quick bounds must be the ones scan_programs finds (flow ids and sizes follow from them).
  if (fast_ && static_cast<std::size_t>(max_id_) + 1 != ids_) return error{"quick bounds"};
  return finish();
}

bool simulator::advance(int r) {
  const action* prog = s_.programs[r].data();
  const std::size_t n = s_.programs[r].size();
  const int rep = r / p_;
  const int device = r - rep * p_;
  std::size_t pc = hot_[r].pc;
  double t = hot_[r].free;
  rank_stats& rs = hot_[r].stats;
  bool ok = true;
  while (pc < n) {
    // The next visit to this rank comes after most other ranks ran: fetch its program now.
    __builtin_prefetch(prog + std::min(pc + 8, n));
    const action& a = prog[pc];
    const int st = a.stage;
    const int mb = a.microbatch;
    // On the quick bounds (run()), what scan_programs would check: the stage is this device's
    // and the microbatch id within the arrays.
    if (fast_ && (static_cast<unsigned>(st) >= static_cast<unsigned>(v_) ||
                  device_of_[st] != device ||
                  (has_microbatch(a.kind) && static_cast<std::size_t>(mb) >= ids_)))
      return false;
    max_id_ = std::max(max_id_, mb);
    switch (a.kind) {
      case action_kind::forward: {
        const std::size_t k = key(rep, st, mb);
        std::uint8_t& sk = state_[k];
        if ((!s_.starts_route(st) && !(sk & has_input_f)) || (sk & fwd_done)) {
          ok = fail_order(r, pc, sk);
          break;
        }
        const int ver = forward_version(rep, st, mb, k);
        if (ver < 0 || ver > groups_[group(rep, st)].newest) {
          ok = fail_version(r, pc, st, mb, ver, t);
          break;
        }
        if (!hold(rep, st, ver)) { ok = fail_bytes(r, t, st); break; }
        sk |= fwd_done;
        if (!s_.ends_route(st) && device_of_[st + 1] == device_of_[st])
          state_[k + m_] |= has_input_f;
        if (__builtin_add_overflow(hot_[r].act_now, act_bytes_[st], &hot_[r].act_now)) {
          ok = fail_bytes(r, t, st);
          break;
        }
        if (++hot_[r].inflight > rs.peak_inflight) rs.peak_inflight = hot_[r].inflight;
        rs.peak_activation_bytes = std::max(rs.peak_activation_bytes, hot_[r].act_now);
        if (!memory_ok(r, t, st)) { ok = false; break; }
        record(r, stream_kind::compute, a, t, t + t_f_[st], ver, -1);
        t += t_f_[st];
        rs.busy += t_f_[st];
        break;
      }
      case action_kind::backward:
      case action_kind::input_grad: {
        const std::size_t k = key(rep, st, mb);
        std::uint8_t& sk = state_[k];
        if (!(sk & fwd_done) || (!s_.ends_route(st) && !(sk & has_input_b)) ||
            (sk & igrad_done)) {
          ok = fail_order(r, pc, sk);
          break;
        }
        const int ver = backward_version(st, mb, k);
        if (ver < 0 || ver > groups_[group(rep, st)].newest) {
          ok = fail_version(r, pc, st, mb, ver, t);
          break;
        }
        if (table_ok_ && ver != table_forward(st, mb)) {  // kept until the last backward
          if (!hold(rep, st, ver)) { ok = fail_bytes(r, t, st); break; }
          if (!memory_ok(r, t, st)) { ok = false; break; }
        }
        const bool full = a.kind == action_kind::backward;
        const double d = full ? t_b_[st] : t_i_[st];
        sk |= full ? (igrad_done | bwd_done) : igrad_done;
        if (!s_.starts_route(st) && device_of_[st - 1] == device_of_[st])
          state_[k - m_] |= has_input_b;
        record(r, stream_kind::compute, a, t, t + d, ver, -1);
        t += d;
        rs.busy += d;
        if (full) release(r, rep, st, mb, k);
        break;
      }
      case action_kind::weight_grad: {
        const std::size_t k = key(rep, st, mb);
        std::uint8_t& sk = state_[k];
        if (!(sk & igrad_done) || (sk & bwd_done)) { ok = fail_order(r, pc, sk); break; }
        sk |= bwd_done;
        const int ver = backward_version(st, mb, k);
        record(r, stream_kind::compute, a, t, t + t_w_[st], ver, -1);
        t += t_w_[st];
        rs.busy += t_w_[st];
        release(r, rep, st, mb, k);
        break;
      }
      case action_kind::send_f:
      case action_kind::send_b: {
        const bool fwd = a.kind == action_kind::send_f;
        const int to = fwd ? st + 1 : st - 1;
        if (to < 0 || to >= v_ || (fwd ? s_.ends_route(st) : s_.starts_route(st))) {
          ok = fail_send(r, pc);
          break;
        }
        const double start = std::max(t, hot_[r].send_free);
        const double end = start + (fwd ? xfer_f_[st] : xfer_b_[st]);
        hot_[r].send_free = end;
        const std::size_t k = key(rep, to, mb);
        (fwd ? arrival_f_ : arrival_b_)[k] = end + (fwd ? lat_f_[st] : lat_b_[st]);
        state_[k] |= fwd ? sent_f : sent_b;
        record(r, stream_kind::send, a, start, end, -1, flow(k, fwd));
        const int dest = rep * p_ + device_of_[to];
        if (hot_[dest].waiting == flow(k, fwd)) {  // wake the receiver only if it waits for this
          hot_[dest].waiting = running;
          ready_.push_back(dest);
        }
        break;
      }
      case action_kind::recv_f:
      case action_kind::recv_b: {
        const bool fwd = a.kind == action_kind::recv_f;
        const std::size_t k = key(rep, st, mb);
        __builtin_prefetch(&(fwd ? arrival_f_ : arrival_b_)[k] + 8);  // the next microbatches'
        __builtin_prefetch(&state_[k] + 64);
        if (!(state_[k] & (fwd ? sent_f : sent_b))) {  // wait for the SEND
          hot_[r].pc = pc;
          hot_[r].free = t;
          hot_[r].waiting = flow(k, fwd);
          return true;
        }
        const double end = std::max(t, (fwd ? arrival_f_ : arrival_b_)[k]);
        state_[k] |= fwd ? has_input_f : has_input_b;
        record(r, stream_kind::recv, a, t, end, -1, flow(k, fwd));
        t = end;
        break;
      }
      case action_kind::reduce: {
        if (p2p_) {
          if (!run_chain_reduce(r, rep, st, pc, t)) return true;
          break;
        }
        // The barrier of every replica's copy of this stage's piece, on every route.
        const int pc_of = s_.piece_of(st);
        if (hot_[r].reduce_gen < 0) {
          hot_[r].reduce_gen = reduce_generation_[pc_of];
          reduce_max_[pc_of] = std::max(reduce_max_[pc_of], t);
          if (++reduce_arrivals_[pc_of] == s_.reduce_group_size()) {
            reduce_end_[pc_of] = reduce_max_[pc_of] + t_reduce_[st];
            reduce_arrivals_[pc_of] = 0;
            reduce_max_[pc_of] = 0.0;
            ++reduce_generation_[pc_of];
            for (int o = 0; o < w_; ++o)
              for (int c = pc_of; c < v_; c += s_.route_stages()) {
                const int peer = o * p_ + device_of_[c];
                if (hot_[peer].waiting == in_reduce) {
                  hot_[peer].waiting = running;
                  ready_.push_back(peer);
                }
              }
          }
        }
        if (reduce_generation_[pc_of] <= hot_[r].reduce_gen) {  // wait for the others
          hot_[r].pc = pc;
          hot_[r].free = t;
          hot_[r].waiting = in_reduce;
          return true;
        }
        hot_[r].reduce_gen = -1;
        const double end = reduce_end_[pc_of];
        record(r, stream_kind::compute, a, end - t_reduce_[st], end, -1, -1);
        rs.busy += t_reduce_[st];
        t = end;
        break;
      }
      case action_kind::step: {
        if (p2p_ && !run_chain_step(r, rep, st, pc, t)) return true;
        // The new version is live; the old newest stays live only while a stash refers to it.
        const std::size_t g = group(rep, st);
        if (groups_[g].newest + 1 >= nver_) return false;  // more STEPs than the quick bounds hold
        const int before = groups_[g].live;
        const int nw = ++groups_[g].newest;
        if (refs_[g * nver_ + nw] == 0) ++groups_[g].live;
        if (refs_[g * nver_ + nw - 1] == 0) --groups_[g].live;
        const std::int64_t grown = param_bytes_[st] * (groups_[g].live - before);  // live grows by <= 1
        if (__builtin_add_overflow(hot_[r].param_now, grown, &hot_[r].param_now)) {
          ok = fail_bytes(r, t, st);
          break;
        }
        note_live(r, g);
        const double step_time = p2p_ && rep < w_ - 1 ? 0.0 : t_step_[st];  // p2p: takes it
        record(r, stream_kind::compute, a, t, t + step_time, -1, -1);
        if (!memory_ok(r, t, st)) { ok = false; break; }
        t += step_time;
        rs.busy += step_time;
        if (p2p_ && rep == w_ - 1) {  // the new version leaves for the other replicas
          chain_step_end_[static_cast<std::size_t>(rep) * v_ + st].push_back(t);
          for (int o = 0; o < w_ - 1; ++o) {
            const int peer = o * p_ + device_of_[st];
            if (hot_[peer].waiting == in_reduce) {
              hot_[peer].waiting = running;
              ready_.push_back(peer);
            }
          }
        }
        break;
      }
      case action_kind::overlap_f_b:  // the F and B after it share the device: one after the other
        break;
    }
    if (!ok) return false;
    ++pc;
  }
  hot_[r].pc = pc;
  hot_[r].free = t;
  return true;
}

// The p2p reduce's REDUCE on replica rep: wait for the previous replica's partial sum of the same
// occurrence, add this replica's gradient, and (but on the last replica) send the partial on,
// one hop. False when it must wait (the previous replica's REDUCE wakes it).
bool simulator::run_chain_reduce(int r, int rep, int st, std::size_t pc, double& t) {
  const std::size_t mine = static_cast<std::size_t>(rep) * v_ + st;
  double start = t;
  if (rep > 0) {
    const auto& before = chain_reduce_end_[mine - v_];
    const std::size_t k = chain_reduce_end_[mine].size();
    if (before.size() <= k) {
      hot_[r].pc = pc;
      hot_[r].free = t;
      hot_[r].waiting = in_reduce;
      return false;
    }
    start = std::max(t, before[k]);
  }
  const double end = start + (rep + 1 < w_ ? t_hop_[st] : 0.0);
  chain_reduce_end_[mine].push_back(end);
  record(r, stream_kind::compute, s_.programs[r][pc], start, end, -1, -1);
  hot_[r].stats.busy += end - start;
  t = end;
  if (rep + 1 < w_) {
    const int next = (rep + 1) * p_ + device_of_[st];
    if (hot_[next].waiting == in_reduce) {
      hot_[next].waiting = running;
      ready_.push_back(next);
    }
  }
  return true;
}

// The p2p reduce's STEP on a replica but the last: wait until the last replica's update of the
// same occurrence and one hop of its new version. False when it must wait.
bool simulator::run_chain_step(int r, int rep, int st, std::size_t pc, double& t) {
  if (rep == w_ - 1) return true;
  const std::size_t mine = static_cast<std::size_t>(rep) * v_ + st;
  const auto& made = chain_step_end_[static_cast<std::size_t>(w_ - 1) * v_ + st];
  const std::size_t k = static_cast<std::size_t>(steps_done_[mine]);
  if (made.size() <= k) {
    hot_[r].pc = pc;
    hot_[r].free = t;
    hot_[r].waiting = in_reduce;
    return false;
  }
  t = std::max(t, made[k] + t_hop_[st]);
  ++steps_done_[mine];
  return true;
}

result<simulation> simulator::finish() {
  simulation sim;
  sim.actions = total_;
  double makespan = 0.0;
  for (int r = 0; r < r_; ++r) {
    hot_[r].stats.finish = std::max(hot_[r].free, hot_[r].send_free);
    makespan = std::max(makespan, hot_[r].stats.finish);
  }
  sim.makespan = makespan;
  double busy = 0.0;
  for (const rank_state& h : hot_) busy += h.stats.busy;
  sim.bubble_fraction = makespan > 0.0 ? std::max(0.0, 1.0 - busy / (makespan * r_)) : 0.0;
  sim.stages.assign(p_, rank_stats{});
  for (int r = 0; r < r_; ++r) {
    rank_stats& d = sim.stages[r % p_];
    const rank_stats& x = hot_[r].stats;
    d.busy = std::max(d.busy, x.busy);
    d.peak_inflight = std::max(d.peak_inflight, x.peak_inflight);
    d.peak_activation_bytes = std::max(d.peak_activation_bytes, x.peak_activation_bytes);
    d.peak_versions = std::max(d.peak_versions, x.peak_versions);
    d.peak_memory_bytes = std::max(d.peak_memory_bytes, x.peak_memory_bytes);
    d.finish = std::max(d.finish, x.finish);
  }
  sim.ranks.reserve(hot_.size());
  for (const rank_state& h : hot_) sim.ranks.push_back(h.stats);
  if (!std::isfinite(sim.makespan) || !std::isfinite(busy)) return error{overflow_message(sim)};
  sim.trace = std::move(trace_);
  return sim;
}

}  // namespace sim_detail

result<simulation> simulate(const schedule& lowered, const cost_model& costs,
                            const simulate_options& options) {
  sim_detail::simulator sim(lowered, costs, options);
  return sim.run();
}

}  // namespace pipeworks
