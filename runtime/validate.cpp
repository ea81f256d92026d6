// The schedule validator: static checks over per-(replica, stage, microbatch) counters, then a
// walk of the programs (program_walk.hpp) that finds deadlocks; both linear in the actions.
#include "runtime/validate.hpp"

#include "runtime/huge_pages.hpp"
#include "runtime/program_walk.hpp"
#include "runtime/validate_layout.hpp"
#include "runtime/validate_report.hpp"
#include "runtime/validate_updates.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pipeworks {

namespace {

// Which action kinds ran for one (replica, virtual stage, microbatch): one bit each. A second
// one is an error at once, so a bit is all a count needs.
enum : std::uint8_t {
  ran_f = 1, ran_b = 2, ran_i = 4, ran_w = 8, ran_sf = 16, ran_rf = 32, ran_sb = 64, ran_rb = 128,
};

std::string act(int stage, action_kind kind, int mb) { return to_string(action{stage, kind, mb}); }

class validator {
 public:
  explicit validator(const schedule& s) : s_(s) {}

  status run() {
    if (auto st = check_layout(); !st) return st;
    if (auto st = scan_programs(); !st) return st;
    if (auto st = check_pairs(); !st) return st;
    if (auto st = find_deadlock(); !st) return st;
    return detail::validate_updates(s_);
  }

 private:
  const schedule& s_;
  int p_ = 1, w_ = 1, stages_ = 1, mbs_ = 0, ranks_ = 0;
  bool lowered_ = false;
  big_vector<std::uint8_t> counts_;  // [slot(q, s, mb)]: ran_* bits

  std::size_t slot(int q, int stage, int mb) const {
    return (static_cast<std::size_t>(q) * stages_ + stage) * mbs_ + mb;
  }
  int rank_of(int q, int stage) const { return q * p_ + s_.device_of[stage]; }
  bool crosses(int a, int b) const { return s_.device_of[a] != s_.device_of[b]; }
  // " of its route" and " (the first of its route)" when the schedule has several routes.
  std::string route_words() const { return s_.routes > 1 ? " of its route" : ""; }
  std::string route_start() const { return s_.routes > 1 ? " (the first of its route)" : ""; }
  std::string where(int r, std::size_t pos) const {
    return to_string(s_.programs[r][pos]) + " (rank " + std::to_string(r) + ", action " +
           std::to_string(pos) + ")";
  }

  status check_layout() {
    p_ = s_.params.stages;
    w_ = s_.params.replicas;
    stages_ = s_.virtual_stages;
    ranks_ = s_.ranks();
    if (auto st = detail::check_layout(s_); !st) return st;
    mbs_ = s_.total_microbatches();  // fits: check_layout bounds it by the action count
    lowered_ = s_.lowered;
    for (std::size_t r = 0; r < s_.programs.size() && !lowered_; ++r)
      for (const action& a : s_.programs[r]) lowered_ = lowered_ || is_comm(a.kind);
    counts_.assign(static_cast<std::size_t>(w_) * stages_ * mbs_, 0);
    return status::success();
  }

  // An OVERLAP_F_B is followed at once by the F it names and a B or I of another microbatch.
  status check_overlap(int r, std::size_t pos) const {
    const program& prog = s_.programs[r];
    const bool pair = pos + 2 < prog.size() && prog[pos + 1].kind == action_kind::forward &&
                      prog[pos + 1].stage == prog[pos].stage &&
                      (prog[pos + 2].kind == action_kind::backward ||
                       prog[pos + 2].kind == action_kind::input_grad);
    if (!pair)
      return make_error(where(r, pos) + ": OVERLAP_F_B must be followed at once by an F of its "
                        "stage and a B or I (write them as (xF..;yB..)OVERLAP_F_B, with any "
                        "RECV before it and any SEND after the pair)");
    if (prog[pos + 1].microbatch == prog[pos + 2].microbatch &&
        prog[pos + 1].stage == prog[pos + 2].stage)
      return make_error(where(r, pos + 1) + " and its own backward are joined by OVERLAP_F_B; a "
                        "microbatch's backward needs its forward done, so join two microbatches");
    return status::success();
  }

  // Per rank, in program order: placement, ranges, duplicates, and local order (a B after its F,
  // a W after its I, a SEND after its producer, a RECV before its consumer).
  status scan_programs() {
    for (int r = 0; r < ranks_; ++r) {
      const int q = r / p_, d = r % p_;
      const program& prog = s_.programs[r];
      for (std::size_t pos = 0; pos < prog.size(); ++pos) {
        const action& a = prog[pos];
        const int s = a.stage, mb = a.microbatch;
        if (s < 0 || s >= stages_)
          return make_error(where(r, pos) + ": stage " + std::to_string(s) +
                            " does not exist; the schedule has virtual stages 0.." +
                            std::to_string(stages_ - 1));
        if (s_.device_of[s] != d)
          return make_error(where(r, pos) + ": stage " + std::to_string(s) + " runs on device " +
                            std::to_string(s_.device_of[s]) + ", but rank " + std::to_string(r) +
                            " is device " + std::to_string(d) + " of replica " +
                            std::to_string(q) + "; move it to rank " + std::to_string(rank_of(q, s)));
        if (a.kind == action_kind::overlap_f_b) {
          if (auto st = check_overlap(r, pos); !st) return st;
          continue;
        }
        if (!has_microbatch(a.kind)) continue;
        if (mb < 0 || mb >= mbs_)
          return make_error(where(r, pos) + ": microbatch " + std::to_string(mb) +
                            " is out of range; with m = " + std::to_string(s_.params.microbatches) +
                            " and " + std::to_string(s_.params.steps) +
                            " steps the ids are 0.." + std::to_string(mbs_ - 1));
        std::uint8_t& c = counts_[slot(q, s, mb)];
        auto twice = [&](std::uint8_t bit) -> status {
          if (!(c & bit)) return status::success();
          return make_error(where(r, pos) + " appears more than once for replica " +
                            std::to_string(q) + "; every action runs exactly once");
        };
        switch (a.kind) {
          case action_kind::forward:
            if (auto st = twice(ran_f); !st) return st;
            c |= ran_f;
            if (!s_.starts_route(s) && crosses(s - 1, s) && lowered_ && !(c & ran_rf))
              return make_error(where(r, pos) + " has no " + act(s, action_kind::recv_f, mb) +
                                " before it, but its input comes from stage " +
                                std::to_string(s - 1) + " on device " +
                                std::to_string(s_.device_of[s - 1]) + "; add the RECV_F before it "
                                "(lower_communication does this)");
            if (!s_.starts_route(s) && !crosses(s - 1, s) &&
                !(counts_[slot(q, s - 1, mb)] & ran_f))
              return make_error(where(r, pos) + " comes before " +
                                act(s - 1, action_kind::forward, mb) +
                                " on the same device, which produces its input; run it after");
            break;
          case action_kind::backward:
          case action_kind::input_grad: {
            const char* name = a.kind == action_kind::backward ? "B" : "I";
            if (!(c & ran_f))
              return make_error(where(r, pos) + ": a " + name + " before its F; " +
                                act(s, action_kind::forward, mb) + " must come earlier on rank " +
                                std::to_string(r));
            if (c & (ran_b | ran_i))
              return make_error(where(r, pos) + ": the backward of microbatch " +
                                std::to_string(mb) + " on stage " + std::to_string(s) +
                                " appears more than once (B and I count as the same backward)");
            c |= a.kind == action_kind::backward ? ran_b : ran_i;
            if (!s_.ends_route(s) && crosses(s, s + 1) && lowered_ && !(c & ran_rb))
              return make_error(where(r, pos) + " has no " + act(s, action_kind::recv_b, mb) +
                                " before it, but its output gradient comes from stage " +
                                std::to_string(s + 1) + " on device " +
                                std::to_string(s_.device_of[s + 1]) + "; add the RECV_B before it "
                                "(lower_communication does this)");
            if (!s_.ends_route(s) && !crosses(s, s + 1)) {
              if (!(counts_[slot(q, s + 1, mb)] & (ran_b | ran_i)))
                return make_error(where(r, pos) + " comes before the backward of stage " +
                                  std::to_string(s + 1) + " for microbatch " + std::to_string(mb) +
                                  " on the same device, which produces its output gradient");
            }
            break;
          }
          case action_kind::weight_grad:
            if (!(c & ran_i))
              return make_error(where(r, pos) + ": a W before its I; " +
                                act(s, action_kind::input_grad, mb) + " must come earlier on rank " +
                                std::to_string(r) +
                                (c & ran_b ? " (it ran a full B instead: drop the W)" : ""));
            if (auto st = twice(ran_w); !st) return st;
            c |= ran_w;
            break;
          case action_kind::send_f:
            if (s_.ends_route(s))
              return make_error(where(r, pos) + ": the last stage" + route_words() +
                                " has no next stage to send to");
            if (!(c & ran_f))
              return make_error(where(r, pos) + " comes before " +
                                act(s, action_kind::forward, mb) + ", which produces what it sends");
            if (auto st = twice(ran_sf); !st) return st;
            c |= ran_sf;
            break;
          case action_kind::recv_f:
            if (s_.starts_route(s))
              return make_error(where(r, pos) + ": stage " + std::to_string(s) + route_start() +
                                " has no previous stage to receive from");
            if (auto st = twice(ran_rf); !st) return st;
            c |= ran_rf;
            break;
          case action_kind::send_b:
            if (s_.starts_route(s))
              return make_error(where(r, pos) + ": stage " + std::to_string(s) + route_start() +
                                " has no previous stage to send to");
            if (!(c & (ran_b | ran_i)))
              return make_error(where(r, pos) + " comes before " +
                                act(s, action_kind::backward, mb) + " (or " +
                                act(s, action_kind::input_grad, mb) +
                                "), which produces what it sends");
            if (auto st = twice(ran_sb); !st) return st;
            c |= ran_sb;
            break;
          case action_kind::recv_b:
            if (s_.ends_route(s))
              return make_error(where(r, pos) + ": the last stage" + route_words() +
                                " has no next stage to receive from");
            if (auto st = twice(ran_rb); !st) return st;
            c |= ran_rb;
            break;
          default:
            break;
        }
      }
    }
    return status::success();
  }

  // Every (replica, stage, microbatch) has one F and one backward, and sends pair with receives.
  // A fast test per slot; the messages are built only for the slot that fails.
  status check_pairs() const {
    for (int q = 0; q < w_; ++q)
      for (int s = 0; s < stages_; ++s) {
        const std::uint8_t* row = &counts_[slot(q, s, 0)];
        const std::uint8_t* next = !s_.ends_route(s) ? &counts_[slot(q, s + 1, 0)] : nullptr;
        const std::uint8_t* prev = !s_.starts_route(s) ? &counts_[slot(q, s - 1, 0)] : nullptr;
        for (int mb = 0; mb < mbs_; ++mb) {
          const std::uint8_t c = row[mb];
          bool bad = !(c & ran_f) || !(c & (ran_b | ran_i)) || ((c & ran_i) && !(c & ran_w));
          if (next) bad = bad || !(c & ran_sf) != !(next[mb] & ran_rf);
          if (prev) bad = bad || !(c & ran_sb) != !(prev[mb] & ran_rb);
          if (bad) return pair_error(q, s, mb);
        }
      }
    return status::success();
  }

  // The message for the first check of check_pairs that slot (q, s, mb) fails.
  status pair_error(int q, int s, int mb) const {
    const std::uint8_t c = counts_[slot(q, s, mb)];
    const std::string rank = "rank " + std::to_string(rank_of(q, s));
    if (!(c & ran_f))
      return make_error("microbatch " + std::to_string(mb) + " never runs on stage " +
                        std::to_string(s) + " (replica " + std::to_string(q) + "): " + rank +
                        " has no " + act(s, action_kind::forward, mb) +
                        "; every stage runs F and B (or I and W) for every microbatch");
    if (!(c & (ran_b | ran_i)))
      return make_error("microbatch " + std::to_string(mb) + " is never consumed on stage " +
                        std::to_string(s) + ": " + act(s, action_kind::forward, mb) + " on " +
                        rank + " has no " + act(s, action_kind::backward, mb) + " (or " +
                        act(s, action_kind::input_grad, mb) + " and " +
                        act(s, action_kind::weight_grad, mb) + ") after it");
    if ((c & ran_i) && !(c & ran_w))
      return make_error(act(s, action_kind::input_grad, mb) + " on " + rank + " has no " +
                        act(s, action_kind::weight_grad, mb) +
                        ": the weight gradient of microbatch " + std::to_string(mb) +
                        " is never computed");
    if (!s_.ends_route(s)) {
      const std::uint8_t next = counts_[slot(q, s + 1, mb)];
      const std::string to = "rank " + std::to_string(rank_of(q, s + 1));
      if ((c & ran_sf) && !(next & ran_rf))
        return make_error("unmatched send: " + act(s, action_kind::send_f, mb) + " on " + rank +
                          " has no " + act(s + 1, action_kind::recv_f, mb) + " on " + to);
      if (!(c & ran_sf) && (next & ran_rf))
        return make_error("unmatched receive: " + act(s + 1, action_kind::recv_f, mb) + " on " +
                          to + " waits for " + act(s, action_kind::send_f, mb) + ", which " +
                          rank + " never sends");
    }
    const std::uint8_t prev = counts_[slot(q, s - 1, mb)];
    const std::string to = "rank " + std::to_string(rank_of(q, s - 1));
    if ((c & ran_sb) && !(prev & ran_rb))
      return make_error("unmatched send: " + act(s, action_kind::send_b, mb) + " on " + rank +
                        " has no " + act(s - 1, action_kind::recv_b, mb) + " on " + to);
    return make_error("unmatched receive: " + act(s - 1, action_kind::recv_b, mb) + " on " + to +
                      " waits for " + act(s, action_kind::send_b, mb) + ", which " + rank +
                      " never sends");
  }

  // The walk (runtime/program_walk.hpp): linear in the number of actions. On a deadlock it walks
  // again, recording each action's logical step for the grid.
  status find_deadlock() {
    counts_.clear();
    counts_.shrink_to_fit();
    if (program_walker(s_, {.lowered = lowered_}).run()) return status::success();
    program_walker walk(s_, {.lowered = lowered_, .record_steps = true});
    walk.run();
    const std::vector<int> stuck = walk.stuck();
    std::vector<std::string> why;
    for (std::size_t i = 0; i < stuck.size() && i < 16; ++i)
      why.push_back(detail::waits_for(s_, walk.positions(), stuck[i]));
    return make_error(detail::deadlock_report(
        {s_.programs, walk.positions(), walk.last_steps(), walk.steps(), stuck, why}));
  }
};

}  // namespace

status validate(const schedule& s) { return validator(s).run(); }

}  // namespace pipeworks
