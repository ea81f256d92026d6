// The simulator's internals, shared by runtime/simulate*.cpp and not part of the public API: the
// per-(replica, stage, microbatch) state bits and the simulator class (its arrays are on huge
// pages, runtime/huge_pages.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/huge_pages.hpp"
#include "runtime/simulate.hpp"

namespace pipeworks::sim_detail {

// Per (replica, virtual stage, microbatch) state bits.
enum : std::uint8_t {
  has_input_f = 1,  // the forward input is here (RECV_F ran, or F of the previous stage here)
  fwd_done = 2,     // F ran: its activations are stashed
  has_input_b = 4,  // the output gradient is on this device
  igrad_done = 8,   // I (or B) ran
  bwd_done = 16,    // the last backward (B or W) ran: the stash is freed
  sent_f = 32,      // the forward input's SEND ran: arrival_f_ holds its arrival time
  sent_b = 64,      // the output gradient's SEND ran: arrival_b_ holds its arrival time
};

std::string fmt(double x);            // shortest readable form, as in messages
std::string bytes_text(double bytes);  // "12 B", "3.5 MiB", "2 GiB"

class simulator {
 public:
  simulator(const schedule& s, const cost_model& c, const simulate_options& o)
      : s_(s), c_(c), o_(o) {}
  result<simulation> run();

 private:
  // ---- set-up (simulate_setup.cpp) ----
  status prepare();
  status check_shape();
  status scan_programs();
  void quick_bounds();
  status program_error(int r) const;
  status check_versions() const;
  int flush_rule_m() const;
  status check_state_size() const;
  void stage_times();

  // ---- the hot loop (simulate.cpp) ----
  result<simulation> run_once();
  bool advance(int r);
  result<simulation> finish();

  std::size_t key(int rep, int st, int mb) const {
    return (static_cast<std::size_t>(rep) * v_ + st) * m_ + mb;
  }
  std::size_t vkey(int st, int mb) const { return static_cast<std::size_t>(st) * m_ + mb; }
  // The version table's entry: computed for a table of the flush rule (every microbatch of step
  // t uses version t: most built-in schedules), read from versions_ otherwise.
  int table_forward(int st, int mb) const {
    return flush_m_ > 0 ? mb / flush_m_ : versions_[vkey(st, mb)].forward;
  }
  int table_backward(int st, int mb) const {
    return flush_m_ > 0 ? mb / flush_m_ : versions_[vkey(st, mb)].backward;
  }
  std::size_t group(int rep, int st) const { return static_cast<std::size_t>(rep) * v_ + st; }
  int rank_of(int rep, int st) const { return rep * p_ + device_of_[st]; }

  // The version F uses: the table's, or the newest when the schedule has no table.
  int forward_version(int rep, int st, int mb, std::size_t k) {
    const int newest = groups_[group(rep, st)].newest;
    if (!table_ok_) {
      stash_version_[k] = newest;
      return newest;
    }
    return table_forward(st, mb);
  }
  int backward_version(int st, int mb, std::size_t k) const {
    return table_ok_ ? table_backward(st, mb) : stash_version_[k];
  }

  // A stash refers to `ver` from F until the last backward. False if the weight bytes overflow.
  bool hold(int rep, int st, int ver) {
    const std::size_t g = group(rep, st);
    if (refs_[g * nver_ + ver]++ == 0 && ver != groups_[g].newest) {
      ++groups_[g].live;
      const int r = rank_of(rep, st);
      if (__builtin_add_overflow(hot_[r].param_now, param_bytes_[st], &hot_[r].param_now)) return false;
      note_live(r, g);
    }
    return true;
  }
  void release(int r, int rep, int st, int mb, std::size_t k) {
    const std::size_t g = group(rep, st);
    const int ver = table_ok_ ? table_forward(st, mb) : stash_version_[k];
    unhold(r, g, st, ver);
    if (table_ok_ && table_backward(st, mb) != ver) {
      unhold(r, g, st, table_backward(st, mb));
    }
    hot_[r].act_now -= act_bytes_[st];
    --hot_[r].inflight;
  }
  void unhold(int r, std::size_t g, int st, int ver) {
    if (--refs_[g * nver_ + ver] == 0 && ver != groups_[g].newest) {
      --groups_[g].live;
      hot_[r].param_now -= param_bytes_[st];
    }
  }
  void note_live(int r, std::size_t g) {
    if (groups_[g].live > hot_[r].stats.peak_versions) hot_[r].stats.peak_versions = groups_[g].live;
  }

  bool memory_ok(int r, double t, int st) {
    std::int64_t used;
    if (__builtin_add_overflow(hot_[r].act_now, hot_[r].param_now, &used)) return fail_bytes(r, t, st);
    rank_stats& rs = hot_[r].stats;
    if (used > rs.peak_memory_bytes) rs.peak_memory_bytes = used;
    const std::int64_t cap = memory_[r % p_];
    return cap == 0 || used <= cap || out_of_memory(r, t, st, used, cap);
  }

  void record(int r, stream_kind sk, const action& a, double start, double end, int version,
              std::int64_t flow_id) {
    if (!o_.record_timeline) return;
    trace_.events.push_back(timeline_event{r, sk, a, start, end, version, flow_id});
  }
  static std::int64_t flow(std::size_t k, bool fwd) {
    return static_cast<std::int64_t>(2 * k + (fwd ? 0 : 1));
  }

  // ---- errors (simulate_errors.cpp); each sets error_ and returns false ----
  std::string where(int r, std::size_t pc) const;
  [[gnu::cold, gnu::noinline]] bool out_of_memory(int r, double t, int st, std::int64_t used,
                                                  std::int64_t cap);
  [[gnu::cold, gnu::noinline]] bool fail_bytes(int r, double t, int st);
  [[gnu::cold, gnu::noinline]] bool fail_order(int r, std::size_t pc, std::uint8_t sk);
  [[gnu::cold, gnu::noinline]] bool fail_version(int r, std::size_t pc, int st, int mb, int ver,
                                                 double t);
  [[gnu::cold, gnu::noinline]] bool fail_send(int r, std::size_t pc);
  std::string deadlock_picture() const;
  std::string overflow_message(const simulation& sim) const;

  const schedule& s_;
  const cost_model& c_;
  const simulate_options& o_;
  int p_ = 1, w_ = 1, v_ = 1, r_ = 1, nver_ = 1;
  // The cost entry of virtual stage st: its own, or with one entry per stage of the model
  // (dualpipe's p) its piece's.
  int cost_index(int st) const {
    return static_cast<int>(c_.stages.size()) == s_.route_stages() && s_.routes > 1 ? s_.piece_of(st)
                                                                                      : st;
  }
  std::size_t ids_ = 1;  // microbatch ids per (replica, stage): the largest id + 1
  std::size_t m_ = 1;    // the flat arrays' row length: ids_ and padding
  std::int64_t total_ = 0;
  std::vector<int> device_of_;
  std::vector<double> t_f_, t_b_, t_i_, t_w_, t_step_, t_reduce_, xfer_f_, lat_f_, xfer_b_, lat_b_;
  std::vector<std::int64_t> act_bytes_, param_bytes_, memory_;
  // per (replica, stage, microbatch)
  big_vector<std::uint8_t> state_;
  raw_array<double> arrival_f_, arrival_b_;
  big_vector<int> stash_version_;
  bool table_ok_ = false;
  bool fast_ = false;  // on quick_bounds: advance checks each action (see run)
  int max_id_ = -1;    // the largest microbatch id run so far
  // The version table, flat [vkey(stage, microbatch)] and on huge pages: its rows are read by
  // every rank in turn, and the schedule's row vectors on small pages cost a TLB miss each.
  big_vector<version_use> versions_;
  int flush_m_ = 0;  // > 0: the table is the flush rule with m = flush_m_, and versions_ is empty
  // per (replica, stage): weight versions, the newest and how many are live; refs_[g * nver_ +
  // version]: the stashes that refer to a version
  struct group_state {
    int newest = 0;
    int live = 1;
  };
  std::vector<group_state> groups_;
  std::vector<int> refs_;
  // What a blocked rank waits for: the flow id of its RECV, or in_reduce; running otherwise.
  static constexpr std::int64_t running = -1, in_reduce = -2;
  // per rank, together: a visit to a rank touches all of it, and the ranks take turns, so one
  // array of these costs two cache lines a visit where an array per field cost one each.
  struct alignas(64) rank_state {
    std::size_t pc = 0;       // the next action
    double free = 0.0;        // when the compute stream is free
    double send_free = 0.0;   // when the send stream is free
    std::int64_t waiting = running;
    int reduce_gen = -1;      // the REDUCE generation it arrived at, -1 when not in one
    int inflight = 0;         // microbatches stashed
    std::int64_t act_now = 0, param_now = 0;  // bytes of activations and of weight versions
    rank_stats stats;
  };
  std::vector<rank_state> hot_;
  // per stage: the REDUCE barrier over replicas
  std::vector<int> reduce_arrivals_, reduce_generation_;
  std::vector<double> reduce_max_, reduce_end_;
  // The p2p reduce (schedule_params::reduce): per (replica * v + stage), when each of its REDUCEs
  // (its partial sum leaves) and, for the last replica, each STEP (its new version leaves) ended;
  // and per stage, one hop of a whole gradient or version between replicas.
  bool p2p_ = false;
  std::vector<std::vector<double>> chain_reduce_end_, chain_step_end_;
  std::vector<int> steps_done_;
  std::vector<double> t_hop_;
  bool run_chain_reduce(int r, int rep, int st, std::size_t pc, double& t);
  bool run_chain_step(int r, int rep, int st, std::size_t pc, double& t);
  std::vector<int> ready_;
  timeline trace_;
  std::string error_;
};

}  // namespace pipeworks::sim_detail
