// The discrete-event simulator. Each rank walks its program in order; an action's start is the
// later of the rank being free and its input having arrived, so the simulation is a single pass
// over the actions in dependency order, with flat per-(replica, stage, microbatch) arrays and no
// allocation per action.
#include "runtime/simulate.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <sstream>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pipeworks {

namespace {

// Per (replica, virtual stage, microbatch) state bits.
enum : std::uint8_t {
  has_input_f = 1,  // the forward input is on this device (RECV_F ran, or F of the previous stage here)
  fwd_done = 2,     // F ran: its activations are stashed
  has_input_b = 4,  // the output gradient is on this device
  igrad_done = 8,   // I (or B) ran
  bwd_done = 16,    // the last backward (B or W) ran: the stash is freed
  sent_f = 32,      // the forward input's SEND ran: arrival_f_ holds its arrival time
  sent_b = 64,      // the output gradient's SEND ran: arrival_b_ holds its arrival time
};


// Allocates large arrays on 2 MiB transparent huge pages where the kernel allows it. A large
// simulation touches a few slots of every rank's rows in turn; with 4 KiB pages that is a TLB
// miss per slot, and huge pages make it about three times faster.
template <class T>
struct huge_page_allocator {
  using value_type = T;
  static constexpr std::size_t huge = std::size_t{2} << 20;
  huge_page_allocator() = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge / 2) return static_cast<T*>(::operator new(bytes));
    const std::size_t rounded = (bytes + huge - 1) / huge * huge;
    void* p = std::aligned_alloc(huge, rounded);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, rounded, MADV_HUGEPAGE);  // a hint; without it the pages are merely small
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    if (n * sizeof(T) < huge / 2) ::operator delete(p);
    else std::free(p);
  }
  template <class U>
  bool operator==(const huge_page_allocator<U>&) const { return true; }
};
template <class T>
using big_vector = std::vector<T, huge_page_allocator<T>>;

// An array whose elements are not initialised, on huge pages when large: untouched parts cost
// neither a write nor a page.
template <class T>
class raw_array {
 public:
  raw_array() = default;
  raw_array(const raw_array&) = delete;
  raw_array& operator=(const raw_array&) = delete;
  ~raw_array() { release(); }
  void reset(std::size_t n) {
    release();
    data_ = huge_page_allocator<T>().allocate(n);
    n_ = n;
  }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  void release() {
    if (data_ != nullptr) huge_page_allocator<T>().deallocate(data_, n_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t n_ = 0;
};

// Asks for huge pages under memory that is allocated but not yet touched (a reserved vector).
void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const std::size_t huge = std::size_t{2} << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) / huge * huge;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / huge * huge;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string bytes_text(std::int64_t b) {
  std::ostringstream s;
  if (b >= (1LL << 30)) s << static_cast<double>(b) / (1LL << 30) << " GiB";
  else if (b >= (1LL << 20)) s << static_cast<double>(b) / (1LL << 20) << " MiB";
  else s << b << " B";
  return s.str();
}

class simulator {
 public:
  simulator(const schedule& s, const cost_model& c, const simulate_options& o) : s_(s), c_(c), o_(o) {}

  result<simulation> run() {
    if (status st = prepare(); !st) return error{st.message()};
    for (int r = r_ - 1; r >= 0; --r) ready_.push_back(r);
    while (!ready_.empty()) {
      const int r = ready_.back();
      ready_.pop_back();
      if (!advance(r)) return error{error_};
    }
    for (int r = 0; r < r_; ++r) {
      if (pc_[r] < s_.programs[r].size()) return error{deadlock_picture()};
    }
    return finish();
  }

 private:
  // ---- set-up: shape checks, per-stage times, flat state ----
  status prepare() {
    p_ = s_.params.stages;
    w_ = s_.params.replicas;
    v_ = s_.virtual_stages;
    r_ = s_.ranks();
    if (p_ < 1 || w_ < 1 || v_ < 1) {
      return make_error("simulate: the schedule has stages=" + std::to_string(p_) + ", replicas=" +
                        std::to_string(w_) + ", virtual_stages=" + std::to_string(v_) + "; each must be >= 1");
    }
    if (r_ != p_ * w_) {
      return make_error("simulate: the schedule has " + std::to_string(r_) + " programs but stages * replicas = " +
                        std::to_string(p_ * w_) + "; give one program per rank (replica * stages + device)");
    }
    device_of_ = s_.device_of;
    if (device_of_.empty()) {
      for (int st = 0; st < v_; ++st) device_of_.push_back(st % p_);
    }
    if (static_cast<int>(device_of_.size()) != v_) {
      return make_error("simulate: device_of has " + std::to_string(device_of_.size()) + " entries for " +
                        std::to_string(v_) + " virtual stages; give one device per virtual stage");
    }
    for (int st = 0; st < v_; ++st) {
      if (device_of_[st] < 0 || device_of_[st] >= p_) {
        return make_error("simulate: device_of[" + std::to_string(st) + "] = " + std::to_string(device_of_[st]) +
                          " is not a device in 0.." + std::to_string(p_ - 1));
      }
    }
    if (status st = c_.check(v_, p_); !st) return st;

    // One pass over the programs: count, check stage/microbatch ranges and placement.
    std::int64_t total = 0;
    int max_mb = -1;
    int max_steps = 0;
    for (int r = 0; r < r_; ++r) {
      const program& prog = s_.programs[r];
      total += static_cast<std::int64_t>(prog.size());
      int steps = 0;
      for (std::size_t i = 0; i < prog.size(); ++i) {
        const action& a = prog[i];
        if (a.stage < 0 || a.stage >= v_) {
          return make_error("simulate: rank " + std::to_string(r) + " action " + std::to_string(i) + " names stage " +
                            std::to_string(a.stage) + ", outside 0.." + std::to_string(v_ - 1));
        }
        if (device_of_[a.stage] != r % p_) {
          return make_error("simulate: rank " + std::to_string(r) + " (device " + std::to_string(r % p_) +
                            ") runs action " + std::to_string(i) + " of stage " + std::to_string(a.stage) +
                            ", which lives on device " + std::to_string(device_of_[a.stage]) +
                            "; a rank runs only the stages of its own device");
        }
        if (a.kind == action_kind::step) ++steps;
        if (a.kind != action_kind::reduce && a.kind != action_kind::step) {
          if (a.microbatch < 0) {
            return make_error("simulate: rank " + std::to_string(r) + " action " + std::to_string(i) +
                              " has no microbatch; F, B, I, W, SEND and RECV need one");
          }
          max_mb = std::max(max_mb, a.microbatch);
        }
      }
      max_steps = std::max(max_steps, steps);
    }
    total_ = total;
    m_ = std::max(max_mb + 1, 1);
    nver_ = max_steps + 1;

    // Per virtual stage times, already divided by the device's speed.
    t_f_.resize(v_); t_b_.resize(v_); t_i_.resize(v_); t_w_.resize(v_); t_step_.resize(v_); t_reduce_.resize(v_);
    xfer_f_.resize(v_); lat_f_.resize(v_); xfer_b_.resize(v_); lat_b_.resize(v_);
    act_bytes_.resize(v_); param_bytes_.resize(v_);
    for (int st = 0; st < v_; ++st) {
      const stage_cost& sc = c_.stage(st);
      const double speed = c_.device(device_of_[st]).speed;
      t_f_[st] = sc.forward / speed;
      t_b_[st] = sc.backward / speed;
      t_i_[st] = sc.input_grad() / speed;
      t_w_[st] = sc.weight_grad / speed;
      t_step_[st] = sc.step / speed;
      t_reduce_[st] = c_.reduce_time(st, w_);
      act_bytes_[st] = sc.activation_bytes;
      param_bytes_[st] = sc.param_bytes;
      if (st + 1 < v_) {  // forward activation to st+1
        const link_cost& l = c_.link_between(device_of_[st], device_of_[st + 1]);
        xfer_f_[st] = l.transfer(sc.boundary_bytes);
        lat_f_[st] = l.latency;
      }
      if (st > 0) {  // input gradient to st-1, the size of st-1's boundary
        const link_cost& l = c_.link_between(device_of_[st], device_of_[st - 1]);
        xfer_b_[st] = l.transfer(c_.stage(st - 1).boundary_bytes);
        lat_b_[st] = l.latency;
      }
    }

    const std::size_t keys = static_cast<std::size_t>(w_) * v_ * m_;
    state_.assign(keys, 0);
    arrival_f_.reset(keys);  // read only after a SEND wrote them (sent_f / sent_b)
    arrival_b_.reset(keys);
    table_ok_ = static_cast<int>(s_.versions.size()) == v_;
    for (int st = 0; table_ok_ && st < v_; ++st) table_ok_ = static_cast<int>(s_.versions[st].size()) >= m_;
    if (!table_ok_) stash_version_.assign(keys, 0);

    const std::size_t groups = static_cast<std::size_t>(w_) * v_;
    newest_.assign(groups, 0);
    live_.assign(groups, 1);
    refs_.assign(groups * nver_, 0);

    pc_.assign(r_, 0);
    free_.assign(r_, 0.0);
    send_free_.assign(r_, 0.0);
    waiting_.assign(r_, running);
    reduce_gen_.assign(r_, -1);
    inflight_.assign(r_, 0);
    act_now_.assign(r_, 0);
    param_now_.assign(r_, 0);
    stats_.assign(r_, rank_stats{});
    memory_.resize(p_);
    for (int d = 0; d < p_; ++d) memory_[d] = c_.device(d).memory;
    for (int r = 0; r < r_; ++r) {
      for (int st = 0; st < v_; ++st) {
        if (device_of_[st] == r % p_) param_now_[r] += param_bytes_[st];
      }
      stats_[r].peak_versions = 1;
      stats_[r].peak_memory_bytes = param_now_[r];
      if (!memory_ok(r, 0.0, -1)) return make_error(error_);
    }
    reduce_arrivals_.assign(v_, 0);
    reduce_max_.assign(v_, 0.0);
    reduce_generation_.assign(v_, 0);
    reduce_end_.assign(v_, 0.0);

    if (o_.record_timeline) {
      trace_.ranks = r_;
      trace_.devices_per_replica = p_;
      trace_.title = o_.title.empty()
                         ? std::string(schedule_name(s_.kind)) + " p=" + std::to_string(p_) + " m=" +
                               std::to_string(s_.params.microbatches) +
                               (s_.params.chunks > 1 ? " v=" + std::to_string(s_.params.chunks) : "") +
                               (w_ > 1 ? " w=" + std::to_string(w_) : "") + " (simulated)"
                         : o_.title;
      trace_.events.reserve(static_cast<std::size_t>(total_));
      advise_huge_pages(trace_.events.data(), trace_.events.capacity() * sizeof(timeline_event));
    }
    return {};
  }

  std::size_t key(int rep, int st, int mb) const {
    return (static_cast<std::size_t>(rep) * v_ + st) * m_ + mb;
  }

  // ---- the hot loop: run rank r until it blocks or finishes ----
  bool advance(int r) {
    const action* prog = s_.programs[r].data();
    const std::size_t n = s_.programs[r].size();
    const int rep = r / p_;
    std::size_t pc = pc_[r];
    double t = free_[r];
    rank_stats& rs = stats_[r];
    bool ok = true;
    while (pc < n) {
      // The next visit to this rank comes after most other ranks ran: fetch its program now.
      __builtin_prefetch(prog + std::min(pc + 8, n));
      const action& a = prog[pc];
      const int st = a.stage;
      const int mb = a.microbatch;
      switch (a.kind) {
        case action_kind::forward: {
          const std::size_t k = key(rep, st, mb);
          std::uint8_t& sk = state_[k];
          if ((st > 0 && !(sk & has_input_f)) || (sk & fwd_done)) { ok = fail_order(r, pc, sk); break; }
          const int ver = forward_version(rep, st, mb, k);
          if (ver < 0 || ver > newest_[group(rep, st)]) { ok = fail_version(r, pc, st, mb, ver, t); break; }
          hold(rep, st, ver);
          sk |= fwd_done;
          if (st + 1 < v_ && device_of_[st + 1] == device_of_[st]) state_[k + m_] |= has_input_f;
          act_now_[r] += act_bytes_[st];
          if (++inflight_[r] > rs.peak_inflight) rs.peak_inflight = inflight_[r];
          rs.peak_activation_bytes = std::max(rs.peak_activation_bytes, act_now_[r]);
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
          if (!(sk & fwd_done) || (st + 1 < v_ && !(sk & has_input_b)) || (sk & igrad_done)) {
            ok = fail_order(r, pc, sk);
            break;
          }
          const int ver = backward_version(st, mb, k);
          if (ver < 0 || ver > newest_[group(rep, st)]) { ok = fail_version(r, pc, st, mb, ver, t); break; }
          if (table_ok_ && ver != s_.versions[st][mb].forward) hold(rep, st, ver);  // kept until the last backward
          const bool full = a.kind == action_kind::backward;
          const double d = full ? t_b_[st] : t_i_[st];
          sk |= full ? (igrad_done | bwd_done) : igrad_done;
          if (st > 0 && device_of_[st - 1] == device_of_[st]) state_[k - m_] |= has_input_b;
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
          if (to < 0 || to >= v_) { ok = fail_send(r, pc); break; }
          const double start = std::max(t, send_free_[r]);
          const double end = start + (fwd ? xfer_f_[st] : xfer_b_[st]);
          send_free_[r] = end;
          const std::size_t k = key(rep, to, mb);
          (fwd ? arrival_f_ : arrival_b_)[k] = end + (fwd ? lat_f_[st] : lat_b_[st]);
          state_[k] |= fwd ? sent_f : sent_b;
          record(r, stream_kind::send, a, start, end, -1, flow(k, fwd));
          const int dest = rep * p_ + device_of_[to];
          if (waiting_[dest] == flow(k, fwd)) {  // wake the receiver only if it waits for this
            waiting_[dest] = running;
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
            pc_[r] = pc;
            free_[r] = t;
            waiting_[r] = flow(k, fwd);
            return true;
          }
          const double end = std::max(t, (fwd ? arrival_f_ : arrival_b_)[k]);
          state_[k] |= fwd ? has_input_f : has_input_b;
          record(r, stream_kind::recv, a, t, end, -1, flow(k, fwd));
          t = end;
          break;
        }
        case action_kind::reduce: {
          if (reduce_gen_[r] < 0) {  // arrive at the barrier of this stage's replicas
            reduce_gen_[r] = reduce_generation_[st];
            reduce_max_[st] = std::max(reduce_max_[st], t);
            if (++reduce_arrivals_[st] == w_) {
              reduce_end_[st] = reduce_max_[st] + t_reduce_[st];
              reduce_arrivals_[st] = 0;
              reduce_max_[st] = 0.0;
              ++reduce_generation_[st];
              for (int o = 0; o < w_; ++o) {
                const int peer = o * p_ + device_of_[st];
                if (waiting_[peer] == in_reduce) {
                  waiting_[peer] = running;
                  ready_.push_back(peer);
                }
              }
            }
          }
          if (reduce_generation_[st] <= reduce_gen_[r]) {  // wait for the other replicas
            pc_[r] = pc;
            free_[r] = t;
            waiting_[r] = in_reduce;
            return true;
          }
          reduce_gen_[r] = -1;
          const double end = reduce_end_[st];
          record(r, stream_kind::compute, a, end - t_reduce_[st], end, -1, -1);
          rs.busy += t_reduce_[st];
          t = end;
          break;
        }
        case action_kind::step: {
          // The new version is live; the old newest stays live only while a stash refers to it.
          const std::size_t g = group(rep, st);
          const int before = live_[g];
          const int nw = ++newest_[g];
          if (refs_[g * nver_ + nw] == 0) ++live_[g];
          if (refs_[g * nver_ + nw - 1] == 0) --live_[g];
          param_now_[r] += param_bytes_[st] * (live_[g] - before);
          note_live(r, g);
          record(r, stream_kind::compute, a, t, t + t_step_[st], -1, -1);
          if (!memory_ok(r, t, st)) { ok = false; break; }
          t += t_step_[st];
          rs.busy += t_step_[st];
          break;
        }
      }
      if (!ok) return false;
      ++pc;
    }
    pc_[r] = pc;
    free_[r] = t;
    return true;
  }

  std::size_t group(int rep, int st) const { return static_cast<std::size_t>(rep) * v_ + st; }

  // The version F uses: the table's, or the newest when the schedule has no table.
  int forward_version(int rep, int st, int mb, std::size_t k) {
    const int newest = newest_[group(rep, st)];
    if (!table_ok_) {
      stash_version_[k] = newest;
      return newest;
    }
    return s_.versions[st][mb].forward;
  }
  int backward_version(int st, int mb, std::size_t k) const {
    return table_ok_ ? s_.versions[st][mb].backward : stash_version_[k];
  }

  // A stash refers to `ver` from F until the last backward.
  void hold(int rep, int st, int ver) {
    const std::size_t g = group(rep, st);
    if (refs_[g * nver_ + ver]++ == 0 && ver != newest_[g]) {
      ++live_[g];
      param_now_[rank_of(rep, st)] += param_bytes_[st];
      note_live(rank_of(rep, st), g);
    }
  }
  void release(int r, int rep, int st, int mb, std::size_t k) {
    const std::size_t g = group(rep, st);
    const int ver = table_ok_ ? s_.versions[st][mb].forward : stash_version_[k];
    unhold(r, g, st, ver);
    if (table_ok_ && s_.versions[st][mb].backward != ver) unhold(r, g, st, s_.versions[st][mb].backward);
    act_now_[r] -= act_bytes_[st];
    --inflight_[r];
  }
  void unhold(int r, std::size_t g, int st, int ver) {
    if (--refs_[g * nver_ + ver] == 0 && ver != newest_[g]) {
      --live_[g];
      param_now_[r] -= param_bytes_[st];
    }
  }
  int rank_of(int rep, int st) const { return rep * p_ + device_of_[st]; }
  void note_live(int r, std::size_t g) {
    if (live_[g] > stats_[r].peak_versions) stats_[r].peak_versions = live_[g];
  }

  bool memory_ok(int r, double t, int st) {
    const std::int64_t used = act_now_[r] + param_now_[r];
    rank_stats& rs = stats_[r];
    if (used > rs.peak_memory_bytes) rs.peak_memory_bytes = used;
    const std::int64_t cap = memory_[r % p_];
    return cap == 0 || used <= cap || out_of_memory(r, t, st, used, cap);
  }
  [[gnu::cold, gnu::noinline]] bool out_of_memory(int r, double t, int st, std::int64_t used, std::int64_t cap) {
    std::ostringstream e;
    e << "simulate: stage " << (st < 0 ? r % p_ : st) << " (device " << r % p_ << ", rank " << r
      << ") runs out of memory at t=" << t << ": it needs " << bytes_text(used) << " ("
      << bytes_text(act_now_[r]) << " of activations for " << inflight_[r] << " stashed microbatches, "
      << bytes_text(param_now_[r]) << " of weights) but the device has " << bytes_text(cap)
      << "; use a schedule with fewer microbatches in flight (1f1b rather than gpipe), more stages, "
         "or a device with more memory";
    error_ = e.str();
    return false;
  }

  void record(int r, stream_kind sk, const action& a, double start, double end, int version, std::int64_t flow_id) {
    if (!o_.record_timeline) return;
    trace_.events.push_back(timeline_event{r, sk, a, start, end, version, flow_id});
  }
  static std::int64_t flow(std::size_t k, bool fwd) { return static_cast<std::int64_t>(2 * k + (fwd ? 0 : 1)); }

  // ---- errors ----
  std::string where(int r, std::size_t pc) const {
    return "rank " + std::to_string(r) + " action " + std::to_string(pc) + " (" + to_string(s_.programs[r][pc]) + ")";
  }
  bool fail_order(int r, std::size_t pc, std::uint8_t sk) {
    const action& a = s_.programs[r][pc];
    std::string why;
    if (a.kind == action_kind::forward) {
      why = (sk & fwd_done) ? "this forward already ran" : "its input is not here: the schedule needs a RECV_F before it "
                                                          "(run lower_communication) or the previous stage's F earlier";
    } else if (a.kind == action_kind::weight_grad) {
      why = (sk & bwd_done) ? "this W already ran" : "its I has not run: W comes after I of the same microbatch";
    } else if (!(sk & fwd_done)) {
      why = "its F has not run on this stage: a backward comes after its forward";
    } else if (sk & igrad_done) {
      why = "this backward already ran";
    } else {
      why = "its output gradient is not here: the schedule needs a RECV_B before it (run lower_communication) "
            "or the next stage's backward earlier";
    }
    error_ = "simulate: " + where(r, pc) + " cannot run: " + why;
    return false;
  }
  bool fail_version(int r, std::size_t pc, int st, int mb, int ver, double t) {
    error_ = "simulate: " + where(r, pc) + " at t=" + fmt(t) + " uses weight version " + std::to_string(ver) +
             " of stage " + std::to_string(st) + " (microbatch " + std::to_string(mb) + "), but " +
             (ver < 0 ? std::string("versions start at 0 (the initial weights)")
                      : "only " + std::to_string(newest_[group(r / p_, st)]) + " STEPs of that stage have run") +
             "; the version table and the STEP placement disagree";
    return false;
  }
  bool fail_send(int r, std::size_t pc) {
    error_ = "simulate: " + where(r, pc) + " sends past the end of the pipeline: SEND_F cannot leave the last "
             "stage and SEND_B cannot leave stage 0";
    return false;
  }

  std::string deadlock_picture() const {
    std::ostringstream e;
    e << "simulate: deadlock: no rank can make progress; each row is a rank's program around where it "
         "stopped, [the stuck action] marked:\n";
    int shown = 0;
    for (int r = 0; r < r_ && shown < 32; ++r) {
      const program& prog = s_.programs[r];
      const std::size_t pc = pc_[r];
      e << "  rank " << r << " (t=" << free_[r] << "): ";
      if (pc >= prog.size()) {
        e << "done\n";
        continue;
      }
      ++shown;
      const std::size_t from = pc >= 4 ? pc - 4 : 0;
      const std::size_t to = std::min(prog.size(), pc + 4);
      if (from > 0) e << "... ";
      for (std::size_t i = from; i < to; ++i) {
        e << (i == pc ? "[" : "") << to_string(prog[i]) << (i == pc ? "]" : "") << ' ';
      }
      if (to < prog.size()) e << "...";
      const action& a = prog[pc];
      if (a.kind == action_kind::recv_f) e << "  <- waits for " << a.stage - 1 << "SEND_F" << a.microbatch;
      if (a.kind == action_kind::recv_b) e << "  <- waits for " << a.stage + 1 << "SEND_B" << a.microbatch;
      if (a.kind == action_kind::reduce) e << "  <- waits for the other replicas' " << a.stage << "REDUCE";
      e << '\n';
    }
    return e.str();
  }

  // ---- results ----
  result<simulation> finish() {
    simulation sim;
    sim.actions = total_;
    double makespan = 0.0;
    for (int r = 0; r < r_; ++r) {
      stats_[r].finish = std::max(free_[r], send_free_[r]);
      makespan = std::max(makespan, stats_[r].finish);
    }
    sim.makespan = makespan;
    double busy = 0.0;
    for (const auto& rs : stats_) busy += rs.busy;
    sim.bubble_fraction = makespan > 0.0 ? std::max(0.0, 1.0 - busy / (makespan * r_)) : 0.0;
    sim.stages.assign(p_, rank_stats{});
    for (int r = 0; r < r_; ++r) {
      rank_stats& d = sim.stages[r % p_];
      const rank_stats& x = stats_[r];
      d.busy = std::max(d.busy, x.busy);
      d.peak_inflight = std::max(d.peak_inflight, x.peak_inflight);
      d.peak_activation_bytes = std::max(d.peak_activation_bytes, x.peak_activation_bytes);
      d.peak_versions = std::max(d.peak_versions, x.peak_versions);
      d.peak_memory_bytes = std::max(d.peak_memory_bytes, x.peak_memory_bytes);
      d.finish = std::max(d.finish, x.finish);
    }
    sim.ranks = std::move(stats_);
    sim.trace = std::move(trace_);
    return sim;
  }

  const schedule& s_;
  const cost_model& c_;
  const simulate_options& o_;
  int p_ = 1, w_ = 1, v_ = 1, r_ = 1, m_ = 1, nver_ = 1;
  std::int64_t total_ = 0;
  std::vector<int> device_of_;
  std::vector<double> t_f_, t_b_, t_i_, t_w_, t_step_, t_reduce_, xfer_f_, lat_f_, xfer_b_, lat_b_;
  std::vector<std::int64_t> act_bytes_, param_bytes_, memory_;
  // per (replica, stage, microbatch)
  big_vector<std::uint8_t> state_;
  raw_array<double> arrival_f_, arrival_b_;
  big_vector<int> stash_version_;
  bool table_ok_ = false;
  // per (replica, stage): weight versions
  std::vector<int> newest_, live_, refs_;
  // per rank
  std::vector<std::size_t> pc_;
  std::vector<double> free_, send_free_;
  // What a blocked rank waits for: the flow id of its RECV, or in_reduce; running otherwise.
  static constexpr std::int64_t running = -1, in_reduce = -2;
  std::vector<std::int64_t> waiting_;
  std::vector<int> reduce_gen_, inflight_;
  std::vector<std::int64_t> act_now_, param_now_;
  std::vector<rank_stats> stats_;
  // per stage: the REDUCE barrier over replicas
  std::vector<int> reduce_arrivals_, reduce_generation_;
  std::vector<double> reduce_max_, reduce_end_;
  std::vector<int> ready_;
  timeline trace_;
  std::string error_;
};

void put_number(std::string& out, double x) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, ec == std::errc() ? end : buf);
}

}  // namespace

result<simulation> simulate(const schedule& lowered, const cost_model& costs, const simulate_options& options) {
  simulator sim(lowered, costs, options);
  return sim.run();
}

std::string to_json(const simulation& sim) {
  std::string out = "{\"makespan\": ";
  put_number(out, sim.makespan);
  out += ", \"bubble_fraction\": ";
  put_number(out, sim.bubble_fraction);
  out += ", \"stages\": [";
  for (std::size_t i = 0; i < sim.stages.size(); ++i) {
    const rank_stats& s = sim.stages[i];
    out += i ? ", {\"busy\": " : "{\"busy\": ";
    put_number(out, s.busy);
    out += ", \"peak_inflight\": " + std::to_string(s.peak_inflight);
    out += ", \"peak_versions\": " + std::to_string(s.peak_versions);
    out += ", \"peak_activation_bytes\": " + std::to_string(s.peak_activation_bytes) + "}";
  }
  out += "]}";
  return out;
}

}  // namespace pipeworks
