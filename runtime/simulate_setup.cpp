// The simulator's set-up: checks the schedule's shape, ids and version table against the cost
// model, bounds the memory its state will take, and fills the per-stage times and flat arrays.
#include <algorithm>
#include <cmath>

#include "runtime/simulate_internal.hpp"

namespace pipeworks::sim_detail {

status simulator::check_shape() {
  p_ = s_.params.stages;
  w_ = s_.params.replicas;
  v_ = s_.virtual_stages;
  r_ = s_.ranks();
  if (p_ < 1 || w_ < 1 || v_ < 1) {
    return make_error("simulate: the schedule has stages=" + std::to_string(p_) +
                      ", replicas=" + std::to_string(w_) + ", virtual_stages=" +
                      std::to_string(v_) + "; each must be >= 1");
  }
  if (static_cast<std::int64_t>(p_) * w_ != r_) {
    return make_error("simulate: the schedule has " + std::to_string(r_) +
                      " programs but stages * replicas = " +
                      std::to_string(static_cast<std::int64_t>(p_) * w_) +
                      "; give one program per rank (replica * stages + device)");
  }
  device_of_ = s_.device_of;
  if (device_of_.empty()) {
    for (int st = 0; st < v_; ++st) device_of_.push_back(st % p_);
  }
  if (static_cast<std::int64_t>(device_of_.size()) != v_) {
    return make_error("simulate: device_of has " + std::to_string(device_of_.size()) +
                      " entries for " + std::to_string(v_) +
                      " virtual stages; give one device per virtual stage");
  }
  for (int st = 0; st < v_; ++st) {
    if (device_of_[st] < 0 || device_of_[st] >= p_) {
      return make_error("simulate: device_of[" + std::to_string(st) + "] = " +
                        std::to_string(device_of_[st]) + " is not a device in 0.." +
                        std::to_string(p_ - 1));
    }
  }
  return c_.check(v_, p_, w_, s_.route_stages());
}

// One pass over the programs: count, check stage and microbatch ranges and placement. The pass
// visits every action, so it only accumulates; a program that fails is scanned again for the
// first action to blame.
status simulator::scan_programs() {
  std::int64_t total = 0;
  std::int64_t max_mb = -1;
  int max_r = 0;
  int max_steps = 0;
  for (int r = 0; r < r_; ++r) {
    const program& prog = s_.programs[r];
    total += static_cast<std::int64_t>(prog.size());
    const int d = r % p_;
    bool bad = false;
    int steps = 0, top = -1;
    int known = -1;  // the last stage found in range and on device d: most actions repeat it
    for (const action& a : prog) {
      if (a.stage != known) {
        if (static_cast<unsigned>(a.stage) >= static_cast<unsigned>(v_) ||
            device_of_[a.stage] != d) {
          bad = true;
          break;
        }
        known = a.stage;
      }
      const bool update = !has_microbatch(a.kind);  // REDUCE, STEP, OVERLAP_F_B
      bad |= !update & (a.microbatch < 0);
      steps += a.kind == action_kind::step;
      top = std::max(top, update ? -1 : a.microbatch);
    }
    if (bad) return program_error(r);
    if (top > max_mb) {
      max_mb = top;
      max_r = r;
    }
    max_steps = std::max(max_steps, steps);
  }
  // Microbatch ids index flat arrays of (largest id + 1) entries per stage, so an id may not be
  // far beyond what the actions could use: at most the action count plus some slack.
  const std::int64_t id_limit = total + 1024;
  if (max_mb >= id_limit) {
    std::size_t max_i = 0;  // where the largest id is
    const program& prog = s_.programs[max_r];
    while (max_i < prog.size() && !(has_microbatch(prog[max_i].kind) &&
                                    prog[max_i].microbatch == max_mb))
      ++max_i;
    return make_error("simulate: rank " + std::to_string(max_r) + " action " +
                      std::to_string(max_i) + " (" + to_string(s_.programs[max_r][max_i]) +
                      ") names microbatch " + std::to_string(max_mb) +
                      ", but the schedule has only " + std::to_string(total) +
                      " actions, so ids must be below " + std::to_string(id_limit) +
                      "; number the microbatches from 0");
  }
  total_ = total;
  ids_ = static_cast<std::size_t>(std::max<std::int64_t>(max_mb + 1, 1));
  // Long rows are padded by 64 entries: rows a power of two apart map every rank's slots to the
  // same few cache sets, and the ranks take turns.
  m_ = ids_ >= 512 ? ids_ + 64 : ids_;
  nver_ = max_steps + 1;
  return {};
}

// The first action of rank r's program that scan_programs refuses, and why.
status simulator::program_error(int r) const {
  const program& prog = s_.programs[r];
  for (std::size_t i = 0; i < prog.size(); ++i) {
    const action& a = prog[i];
    const std::string at = "simulate: rank " + std::to_string(r) + " action " + std::to_string(i);
    if (a.stage < 0 || a.stage >= v_) {
      return make_error(at + " names stage " + std::to_string(a.stage) + ", outside 0.." +
                        std::to_string(v_ - 1));
    }
    if (device_of_[a.stage] != r % p_) {
      return make_error(at + " (" + to_string(a) + ") runs on device " + std::to_string(r % p_) +
                        " but stage " + std::to_string(a.stage) + " lives on device " +
                        std::to_string(device_of_[a.stage]) +
                        "; a rank runs only the stages of its own device");
    }
    if (has_microbatch(a.kind) && a.microbatch < 0) {
      return make_error(at + " has no microbatch; F, B, I, W, SEND and RECV need one");
    }
  }
  return make_error("simulate: rank " + std::to_string(r) + " has an action it cannot run");
}

// No table: every F uses the newest version. A table must cover every stage and microbatch.
status simulator::check_versions() const {
  if (s_.versions.empty()) return {};
  bool ok = static_cast<std::int64_t>(s_.versions.size()) == v_;
  for (int st = 0; ok && st < v_; ++st) ok = s_.versions[st].size() >= ids_;
  if (ok) return {};
  std::size_t shortest = s_.versions.empty() ? 0 : s_.versions[0].size();
  for (const auto& row : s_.versions) shortest = std::min(shortest, row.size());
  return make_error("simulate: the version table has " + std::to_string(s_.versions.size()) +
                    " rows (the shortest with " + std::to_string(shortest) +
                    " entries) but must have one row per virtual stage (" + std::to_string(v_) +
                    ") with an entry for every microbatch id 0.." + std::to_string(ids_ - 1) +
                    " (" + std::to_string(ids_) + " entries); or leave it empty to use the "
                    "newest version at each F");
}

// The flat state takes bytes per (replica, stage, microbatch) and the timeline bytes per action;
// refuse before allocating more than this machine has.
status simulator::check_state_size() const {
  const double keys = static_cast<double>(w_) * v_ * static_cast<double>(m_);
  double bytes = keys * (1 + 2 * sizeof(double) + (s_.versions.empty() ? sizeof(int) : 0));
  if (!s_.versions.empty()) bytes += static_cast<double>(v_) * m_ * sizeof(version_use);
  bytes += static_cast<double>(w_) * v_ * nver_ * sizeof(int);
  if (o_.record_timeline) bytes += static_cast<double>(total_) * sizeof(timeline_event);
  const double limit = static_cast<double>(memory_limit_bytes());
  if (bytes <= limit) return {};
  return make_error("simulate: the simulation would need about " + bytes_text(bytes) +
                    " for its state (" + fmt(keys) + " replica-stage-microbatch slots" +
                    (o_.record_timeline ? ", and a timeline of " + std::to_string(total_) +
                                              " events"
                                        : std::string()) +
                    ") but may use at most " + bytes_text(limit) +
                    " (3/4 of this machine's memory); simulate fewer microbatches or stages" +
                    (o_.record_timeline ? ", or turn the timeline off" : ""));
}

// Per virtual stage times, already divided by the device's speed.
void simulator::stage_times() {
  for (auto* x : {&t_f_, &t_b_, &t_i_, &t_w_, &t_step_, &t_reduce_, &xfer_f_, &lat_f_, &xfer_b_,
                  &lat_b_}) {
    x->assign(v_, 0.0);
  }
  act_bytes_.resize(v_);
  param_bytes_.resize(v_);
  for (int st = 0; st < v_; ++st) {
    const stage_cost& sc = c_.stage(cost_index(st));
    const double speed = c_.device(device_of_[st]).speed;
    t_f_[st] = sc.forward / speed;
    t_b_[st] = sc.backward / speed;
    t_i_[st] = sc.input_grad() / speed;
    t_w_[st] = sc.weight_grad / speed;
    t_step_[st] = sc.step / speed;
    t_reduce_[st] = c_.reduce_time(cost_index(st), s_.reduce_group_size());
    act_bytes_[st] = sc.activation_bytes;
    param_bytes_[st] = sc.param_bytes;
    if (!s_.ends_route(st)) {  // forward activation to st+1
      const link_cost& l = c_.link_between(device_of_[st], device_of_[st + 1]);
      xfer_f_[st] = l.transfer(sc.boundary_bytes);
      lat_f_[st] = l.latency;
    }
    if (!s_.starts_route(st)) {  // input gradient to st-1, the size of st-1's boundary
      const link_cost& l = c_.link_between(device_of_[st], device_of_[st - 1]);
      xfer_b_[st] = l.transfer(c_.stage(cost_index(st - 1)).boundary_bytes);
      lat_b_[st] = l.latency;
    }
  }
}

// A built-in schedule's bounds from its parameters, what scan_programs finds for it: ids
// 0..m·steps − 1 and v · steps STEPs per rank. advance checks every action against them.
void simulator::quick_bounds() {
  total_ = 0;
  for (const program& prog : s_.programs) total_ += static_cast<std::int64_t>(prog.size());
  ids_ = static_cast<std::size_t>(std::max(s_.total_microbatches(), 1));
  m_ = ids_ >= 512 ? ids_ + 64 : ids_;  // as in scan_programs
  nver_ = s_.params.steps * s_.params.chunks + 1;
}

// s_.params.microbatches when every entry of the table is {mb / m, mb / m}, else 0.
int simulator::flush_rule_m() const {
  const int m = s_.params.microbatches;
  if (m < 1) return 0;
  for (const auto& row : s_.versions)
    for (std::size_t mb = 0; mb < ids_; ++mb) {
      const int t = static_cast<int>(mb) / m;
      if (row[mb].forward != t || row[mb].backward != t) return 0;
    }
  return m;
}

status simulator::prepare() {
  if (status st = check_shape(); !st) return st;
  if (fast_) quick_bounds();
  else if (status st = scan_programs(); !st) return st;
  if (status st = check_versions(); !st) return st;
  if (status st = check_state_size(); !st) return st;
  stage_times();

  const std::size_t keys = static_cast<std::size_t>(w_) * v_ * m_;
  state_.assign(keys, 0);
  arrival_f_.reset(keys);  // read only after a SEND wrote them (sent_f / sent_b)
  arrival_b_.reset(keys);
  table_ok_ = !s_.versions.empty();
  if (!table_ok_) stash_version_.assign(keys, 0);
  flush_m_ = table_ok_ ? flush_rule_m() : 0;
  if (table_ok_ && flush_m_ == 0) {
    versions_.reserve(static_cast<std::size_t>(v_) * m_);
    for (const auto& row : s_.versions) {
      versions_.insert(versions_.end(), row.begin(), row.begin() + static_cast<std::ptrdiff_t>(ids_));
      versions_.resize(versions_.size() + (m_ - ids_));
    }
  }

  const std::size_t groups = static_cast<std::size_t>(w_) * v_;
  groups_.assign(groups, group_state{});
  refs_.assign(groups * nver_, 0);

  hot_.assign(r_, rank_state{});
  memory_.resize(p_);
  for (int d = 0; d < p_; ++d) memory_[d] = c_.device(d).memory;
  for (int r = 0; r < r_; ++r) {
    for (int st = 0; st < v_; ++st) {
      if (device_of_[st] != r % p_) continue;
      if (__builtin_add_overflow(hot_[r].param_now, param_bytes_[st], &hot_[r].param_now)) {
        fail_bytes(r, 0.0, st);
        return make_error(error_);
      }
    }
    hot_[r].stats.peak_versions = 1;
    hot_[r].stats.peak_memory_bytes = hot_[r].param_now;
    if (!memory_ok(r, 0.0, -1)) return make_error(error_);
  }
  reduce_arrivals_.assign(v_, 0);
  reduce_max_.assign(v_, 0.0);
  reduce_generation_.assign(v_, 0);
  reduce_end_.assign(v_, 0.0);
  p2p_ = s_.params.reduce == reduce_mode::p2p && w_ > 1;
  if (p2p_) {
    chain_reduce_end_.assign(static_cast<std::size_t>(w_) * v_, {});
    chain_step_end_.assign(static_cast<std::size_t>(w_) * v_, {});
    steps_done_.assign(static_cast<std::size_t>(w_) * v_, 0);
    // A hop carries one whole gradient (or version): its transfer and latency on reduce_link, or
    // with a given REDUCE time, the ring's time for w/(2(w-1)) of its steps (one gradient's bytes).
    t_hop_.assign(v_, 0.0);
    for (int st = 0; st < v_; ++st) {
      const stage_cost& sc = c_.stage(cost_index(st));
      t_hop_[st] = sc.reduce >= 0.0 ? sc.reduce * w_ / (2.0 * (w_ - 1))
                                    : c_.reduce_link.transfer(sc.param_bytes) + c_.reduce_link.latency;
    }
  }

  if (o_.record_timeline) {
    trace_.ranks = r_;
    trace_.devices_per_replica = p_;
    trace_.title = o_.title;
    if (trace_.title.empty()) {
      trace_.title = std::string(schedule_name(s_.kind)) + " p=" + std::to_string(p_) +
                     " m=" + std::to_string(s_.params.microbatches * s_.routes) +
                     (s_.params.chunks > 1 ? " v=" + std::to_string(s_.params.chunks) : "") +
                     (w_ > 1 ? " w=" + std::to_string(w_) : "") + " (simulated)";
    }
    trace_.events.reserve(static_cast<std::size_t>(total_));
    advise_huge_pages(trace_.events.data(), trace_.events.capacity() * sizeof(timeline_event));
  }
  return {};
}

}  // namespace pipeworks::sim_detail
