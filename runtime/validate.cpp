// The schedule validator: static checks over per-(replica, stage, microbatch) counters, then a
// walk of the programs (program_walk.hpp) that finds deadlocks; both linear in the actions.
#include "runtime/validate.hpp"

#include "runtime/program_walk.hpp"
#include "runtime/validate_layout.hpp"
#include "runtime/validate_report.hpp"
#include "runtime/validate_updates.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pipeworks {

namespace {

// How often each action kind appears for one (replica, virtual stage, microbatch), saturating.
struct counts {
  std::uint8_t f = 0, b = 0, i = 0, w = 0, sf = 0, rf = 0, sb = 0, rb = 0;
};

void bump(std::uint8_t& c) {
  if (c < 255) ++c;
}

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
  std::vector<counts> counts_;  // [slot(q, s, mb)]

  std::size_t slot(int q, int stage, int mb) const {
    return (static_cast<std::size_t>(q) * stages_ + stage) * mbs_ + mb;
  }
  int rank_of(int q, int stage) const { return q * p_ + s_.device_of[stage]; }
  bool crosses(int a, int b) const { return s_.device_of[a] != s_.device_of[b]; }
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
    for (const program& prog : s_.programs)
      for (const action& a : prog) lowered_ = lowered_ || is_comm(a.kind);
    counts_.assign(static_cast<std::size_t>(w_) * stages_ * mbs_, counts{});
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
        if (!has_microbatch(a.kind)) continue;
        if (mb < 0 || mb >= mbs_)
          return make_error(where(r, pos) + ": microbatch " + std::to_string(mb) +
                            " is out of range; with m = " + std::to_string(s_.params.microbatches) +
                            " and " + std::to_string(s_.params.steps) +
                            " steps the ids are 0.." + std::to_string(mbs_ - 1));
        counts& c = counts_[slot(q, s, mb)];
        auto twice = [&](std::uint8_t n) -> status {
          if (n == 0) return status::success();
          return make_error(where(r, pos) + " appears more than once for replica " +
                            std::to_string(q) + "; every action runs exactly once");
        };
        switch (a.kind) {
          case action_kind::forward:
            if (auto st = twice(c.f); !st) return st;
            bump(c.f);
            if (s > 0 && crosses(s - 1, s) && lowered_ && c.rf == 0)
              return make_error(where(r, pos) + " has no " + act(s, action_kind::recv_f, mb) +
                                " before it, but its input comes from stage " +
                                std::to_string(s - 1) + " on device " +
                                std::to_string(s_.device_of[s - 1]) + "; add the RECV_F before it "
                                "(lower_communication does this)");
            if (s > 0 && !crosses(s - 1, s) && counts_[slot(q, s - 1, mb)].f == 0)
              return make_error(where(r, pos) + " comes before " +
                                act(s - 1, action_kind::forward, mb) +
                                " on the same device, which produces its input; run it after");
            break;
          case action_kind::backward:
          case action_kind::input_grad: {
            const char* name = a.kind == action_kind::backward ? "B" : "I";
            if (c.f == 0)
              return make_error(where(r, pos) + ": a " + name + " before its F; " +
                                act(s, action_kind::forward, mb) + " must come earlier on rank " +
                                std::to_string(r));
            if (c.b || c.i)
              return make_error(where(r, pos) + ": the backward of microbatch " +
                                std::to_string(mb) + " on stage " + std::to_string(s) +
                                " appears more than once (B and I count as the same backward)");
            bump(a.kind == action_kind::backward ? c.b : c.i);
            if (s + 1 < stages_ && crosses(s, s + 1) && lowered_ && c.rb == 0)
              return make_error(where(r, pos) + " has no " + act(s, action_kind::recv_b, mb) +
                                " before it, but its output gradient comes from stage " +
                                std::to_string(s + 1) + " on device " +
                                std::to_string(s_.device_of[s + 1]) + "; add the RECV_B before it "
                                "(lower_communication does this)");
            if (s + 1 < stages_ && !crosses(s, s + 1)) {
              const counts& next = counts_[slot(q, s + 1, mb)];
              if (next.b == 0 && next.i == 0)
                return make_error(where(r, pos) + " comes before the backward of stage " +
                                  std::to_string(s + 1) + " for microbatch " + std::to_string(mb) +
                                  " on the same device, which produces its output gradient");
            }
            break;
          }
          case action_kind::weight_grad:
            if (c.i == 0)
              return make_error(where(r, pos) + ": a W before its I; " +
                                act(s, action_kind::input_grad, mb) + " must come earlier on rank " +
                                std::to_string(r) + (c.b ? " (it ran a full B instead: drop the W)"
                                                         : ""));
            if (auto st = twice(c.w); !st) return st;
            bump(c.w);
            break;
          case action_kind::send_f:
            if (s + 1 >= stages_)
              return make_error(where(r, pos) + ": the last stage has no next stage to send to");
            if (c.f == 0)
              return make_error(where(r, pos) + " comes before " +
                                act(s, action_kind::forward, mb) + ", which produces what it sends");
            if (auto st = twice(c.sf); !st) return st;
            bump(c.sf);
            break;
          case action_kind::recv_f:
            if (s == 0)
              return make_error(where(r, pos) + ": stage 0 has no previous stage to receive from");
            if (auto st = twice(c.rf); !st) return st;
            bump(c.rf);
            break;
          case action_kind::send_b:
            if (s == 0)
              return make_error(where(r, pos) + ": stage 0 has no previous stage to send to");
            if (c.b == 0 && c.i == 0)
              return make_error(where(r, pos) + " comes before " +
                                act(s, action_kind::backward, mb) + " (or " +
                                act(s, action_kind::input_grad, mb) +
                                "), which produces what it sends");
            if (auto st = twice(c.sb); !st) return st;
            bump(c.sb);
            break;
          case action_kind::recv_b:
            if (s + 1 >= stages_)
              return make_error(where(r, pos) + ": the last stage has no next stage to receive "
                                "from");
            if (auto st = twice(c.rb); !st) return st;
            bump(c.rb);
            break;
          default:
            break;
        }
      }
    }
    return status::success();
  }

  // Every (replica, stage, microbatch) has one F and one backward, and sends pair with receives.
  status check_pairs() {
    for (int q = 0; q < w_; ++q)
      for (int s = 0; s < stages_; ++s)
        for (int mb = 0; mb < mbs_; ++mb) {
          const counts& c = counts_[slot(q, s, mb)];
          const std::string rank = "rank " + std::to_string(rank_of(q, s));
          if (c.f == 0)
            return make_error("microbatch " + std::to_string(mb) + " never runs on stage " +
                              std::to_string(s) + " (replica " + std::to_string(q) + "): " +
                              rank + " has no " + act(s, action_kind::forward, mb) +
                              "; every stage runs F and B (or I and W) for every microbatch");
          if (c.b == 0 && c.i == 0)
            return make_error("microbatch " + std::to_string(mb) + " is never consumed on stage " +
                              std::to_string(s) + ": " + act(s, action_kind::forward, mb) +
                              " on " + rank + " has no " + act(s, action_kind::backward, mb) +
                              " (or " + act(s, action_kind::input_grad, mb) + " and " +
                              act(s, action_kind::weight_grad, mb) + ") after it");
          if (c.i && c.w == 0)
            return make_error(act(s, action_kind::input_grad, mb) + " on " + rank + " has no " +
                              act(s, action_kind::weight_grad, mb) +
                              ": the weight gradient of microbatch " + std::to_string(mb) +
                              " is never computed");
          if (s + 1 < stages_) {
            const counts& next = counts_[slot(q, s + 1, mb)];
            const std::string to = "rank " + std::to_string(rank_of(q, s + 1));
            if (c.sf && !next.rf)
              return make_error("unmatched send: " + act(s, action_kind::send_f, mb) + " on " +
                                rank + " has no " + act(s + 1, action_kind::recv_f, mb) + " on " +
                                to);
            if (!c.sf && next.rf)
              return make_error("unmatched receive: " + act(s + 1, action_kind::recv_f, mb) +
                                " on " + to + " waits for " + act(s, action_kind::send_f, mb) +
                                ", which " + rank + " never sends");
          }
          if (s > 0) {
            const counts& prev = counts_[slot(q, s - 1, mb)];
            const std::string to = "rank " + std::to_string(rank_of(q, s - 1));
            if (c.sb && !prev.rb)
              return make_error("unmatched send: " + act(s, action_kind::send_b, mb) + " on " +
                                rank + " has no " + act(s - 1, action_kind::recv_b, mb) + " on " +
                                to);
            if (!c.sb && prev.rb)
              return make_error("unmatched receive: " + act(s - 1, action_kind::recv_b, mb) +
                                " on " + to + " waits for " + act(s, action_kind::send_b, mb) +
                                ", which " + rank + " never sends");
          }
        }
    return status::success();
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
