// The validator's update and version checks; see validate_updates.hpp. Linear in the actions.
#include "runtime/validate_updates.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/huge_pages.hpp"

namespace pipeworks::detail {

namespace {

class update_checker {
 public:
  explicit update_checker(const schedule& s) : s_(s) {}

  status run() {
    p_ = s_.params.stages;
    w_ = s_.params.replicas;
    m_ = s_.params.microbatches;
    steps_ = s_.params.steps;
    stages_ = s_.virtual_stages;
    mbs_ = s_.total_microbatches();
    if (m_ < 1 || steps_ < 1)
      return make_error("schedule layout: m and the step count must be at least 1 (got m = " +
                        std::to_string(m_) + ", steps = " + std::to_string(steps_) + ")");
    if (auto st = check_table_shape(); !st) return st;
    const std::size_t slots = static_cast<std::size_t>(w_) * stages_ * mbs_;
    f_steps_.assign(slots, -1);
    steps_seen_.assign(stages_, 0);
    reduce_pending_.assign(stages_, 0);
    closed_.assign(static_cast<std::size_t>(stages_) * steps_, 0);
    stages_of_.assign(p_, {});
    for (int v = 0; v < stages_; ++v) stages_of_[s_.device_of[v]].push_back(v);
    for (int r = 0; r < s_.ranks(); ++r)
      if (auto st = walk(r); !st) return st;
    return check_rule();
  }

 private:
  const schedule& s_;
  int p_ = 1, w_ = 1, m_ = 1, steps_ = 1, stages_ = 1, mbs_ = 0;
  big_vector<int> f_steps_;           // [slot]: STEPs of the stage before F, on that replica
  std::vector<int> steps_seen_, reduce_pending_;  // [stage], for the rank being walked
  std::vector<int> closed_;           // [stage * steps + t]: closed backwards of step t
  std::vector<std::vector<int>> stages_of_;       // [device]: its virtual stages

  std::size_t slot(int q, int st, int mb) const {
    return (static_cast<std::size_t>(q) * stages_ + st) * mbs_ + mb;
  }
  std::string where(int r, std::size_t pos) const {
    return to_string(s_.programs[r][pos]) + " (rank " + std::to_string(r) + ", action " +
           std::to_string(pos) + ")";
  }
  bool two_versions() const {
    return !s_.custom_programs &&
           (s_.kind == schedule_kind::cyclic || s_.kind == schedule_kind::two_bw);
  }

  status check_table_shape() const {
    if (static_cast<int>(s_.versions.size()) != stages_)
      return make_error("version table: " + std::to_string(s_.versions.size()) + " rows for " +
                        std::to_string(stages_) + " virtual stages; give one row per stage");
    for (int st = 0; st < stages_; ++st) {
      const auto& row = s_.versions[st];
      if (static_cast<int>(row.size()) != mbs_)
        return make_error("version table: row " + std::to_string(st) + " has " +
                          std::to_string(row.size()) + " entries for " + std::to_string(mbs_) +
                          " microbatches (m = " + std::to_string(m_) + " x " +
                          std::to_string(steps_) + " steps); give one entry per microbatch id");
      for (int mb = 0; mb < mbs_; ++mb)
        if (row[mb].forward != row[mb].backward || row[mb].forward < 0)
          return make_error("version table: stage " + std::to_string(st) + ", microbatch " +
                            std::to_string(mb) + ": F uses version " +
                            std::to_string(row[mb].forward) + " and B version " +
                            std::to_string(row[mb].backward) +
                            "; the backward must use its forward's (stashed) version, >= 0");
    }
    return status::success();
  }

  // One rank in program order: STEP and REDUCE placement, and the STEPs before each F.
  status walk(int r) {
    const int q = r / p_, d = r % p_;
    for (int st : stages_of_[d]) {
      steps_seen_[st] = 0;
      reduce_pending_[st] = 0;
      std::fill_n(closed_.begin() + static_cast<std::ptrdiff_t>(st) * steps_, steps_, 0);
    }
    const bool flush = is_flush(s_.kind) && !s_.custom_programs;
    const program& prog = s_.programs[r];
    for (std::size_t pos = 0; pos < prog.size(); ++pos) {
      const action& a = prog[pos];
      const int st = a.stage, mb = a.microbatch;
      const int newest = steps_seen_[st];
      switch (a.kind) {
        case action_kind::forward: {
          const int t = mb / m_;
          if (flush && newest < t)
            return make_error(where(r, pos) + " is a forward of step " + std::to_string(t) +
                              ", but only " + std::to_string(newest) + " STEPs of stage " +
                              std::to_string(st) + " ran before it; a flush schedule runs " +
                              std::to_string(st) + "STEP number " + std::to_string(t) +
                              " before any forward of step " + std::to_string(t));
          const int v = s_.versions[st][mb].forward;
          if (v > newest)
            return make_error(where(r, pos) + " uses version " + std::to_string(v) +
                              " (version table), but only " + std::to_string(newest) +
                              " STEPs of stage " + std::to_string(st) +
                              " ran before it, so the newest version is " +
                              std::to_string(newest));
          f_steps_[slot(q, st, mb)] = newest;
          break;
        }
        case action_kind::backward:
        case action_kind::input_grad:
        case action_kind::weight_grad: {
          const int v = s_.versions[st][mb].backward;
          if (two_versions() && v < newest - 1)
            return make_error(where(r, pos) + " uses version " + std::to_string(v) +
                              ", but stage " + std::to_string(st) + " is at version " +
                              std::to_string(newest) + " and " +
                              std::string(schedule_name(s_.kind)) +
                              " keeps only two versions live; use version >= " +
                              std::to_string(newest - 1));
          if (a.kind != action_kind::input_grad) ++closed_[static_cast<std::size_t>(st) * steps_ + mb / m_];
          break;
        }
        case action_kind::reduce:
          if (s_.reduce_group_size() == 1)
            return make_error(where(r, pos) + ": a REDUCE with w = 1 replica; there is nothing to "
                              "reduce with, drop it");
          if (reduce_pending_[st])
            return make_error(where(r, pos) + ": a second REDUCE of stage " + std::to_string(st) +
                              " before its STEP; run exactly one REDUCE before each STEP");
          reduce_pending_[st] = 1;
          break;
        case action_kind::step: {
          const int k = newest;
          if (k >= steps_)
            return make_error(where(r, pos) + " is STEP number " + std::to_string(k + 1) +
                              " of stage " + std::to_string(st) + ", but the schedule has " +
                              std::to_string(steps_) + " step" + (steps_ == 1 ? "" : "s") +
                              "; run exactly one STEP per step");
          if (closed_[static_cast<std::size_t>(st) * steps_ + k] < m_)
            return make_error(where(r, pos) + " is STEP " + std::to_string(k) + " of stage " +
                              std::to_string(st) + ", but the backward of " +
                              missing_backward(r, pos, st, k) + " (step " + std::to_string(k) +
                              ") comes after it; STEP " + std::to_string(k) +
                              " must follow every backward (B, or W) of microbatches " +
                              std::to_string(k * m_) + ".." + std::to_string(k * m_ + m_ - 1));
          if (s_.reduce_group_size() > 1 && !reduce_pending_[st])
            return make_error(where(r, pos) + " has no " + std::to_string(st) +
                              "REDUCE before it; with w = " + std::to_string(w_) + " replicas" +
                              (s_.routes > 1 ? " and " + std::to_string(s_.routes) + " routes" : "") +
                              " every STEP follows one REDUCE of its stage");
          reduce_pending_[st] = 0;
          ++steps_seen_[st];
          break;
        }
        default:
          break;
      }
    }
    for (int st : stages_of_[d]) {
      const std::string who = "stage " + std::to_string(st) + " on rank " + std::to_string(r) +
                              " (replica " + std::to_string(q) + ")";
      if (reduce_pending_[st])
        return make_error(who + " ends with a REDUCE that no STEP follows; put " +
                          std::to_string(st) + "STEP after it");
      if (s_.steps_known && steps_seen_[st] != steps_)
        return make_error(who + " runs " + std::to_string(steps_seen_[st]) + " STEPs, but the "
                          "schedule has " + std::to_string(steps_) + " step" +
                          (steps_ == 1 ? "" : "s") + " of m = " + std::to_string(m_) +
                          " microbatches; run one STEP after each step's backwards");
    }
    return status::success();
  }

  // The first microbatch of step k whose closing backward comes after position `pos`.
  std::string missing_backward(int r, std::size_t pos, int st, int k) const {
    const program& prog = s_.programs[r];
    for (std::size_t i = pos + 1; i < prog.size(); ++i) {
      const action& a = prog[i];
      if (a.stage == st && a.microbatch / m_ == k && a.microbatch >= 0 &&
          (a.kind == action_kind::backward || a.kind == action_kind::weight_grad))
        return "microbatch " + std::to_string(a.microbatch) + ", " + where(r, i) + ",";
    }
    return "some microbatch";
  }

  // The version table against the kind's rule, for every replica. A fast test per slot; the
  // message is built only for the first that fails.
  status check_rule() const {
    enum class rule { latest, vertical_sync, delayed, none } kind = rule::none;
    if (s_.custom_programs || is_flush(s_.kind) || s_.kind == schedule_kind::pipedream)
      kind = rule::latest;  // flush: the STEPs before F are t, checked in walk()
    else if (s_.kind == schedule_kind::pipedream_vs)
      kind = rule::vertical_sync;
    else if (s_.kind == schedule_kind::two_bw)
      kind = rule::delayed;
    if (kind == rule::none) return status::success();
    for (int q = 0; q < w_; ++q)
      for (int st = 0; st < stages_; ++st) {
        const std::vector<version_use>& row = s_.versions[st];
        for (int mb = 0; mb < mbs_; ++mb) {
          int expected = 0;
          switch (kind) {
            case rule::latest: expected = f_steps_[slot(q, st, mb)]; break;
            case rule::vertical_sync: expected = f_steps_[slot(q, 0, mb)]; break;
            default: expected = std::max(mb / m_ - 1, 0); break;
          }
          if (row[mb].forward == expected) continue;
          std::string why;
          switch (kind) {
            case rule::latest:
              why = "the STEPs of stage " + std::to_string(st) + " before it";
              break;
            case rule::vertical_sync:
              why = "the STEPs of stage 0 before its F there (vertical sync)";
              break;
            default:
              why = "max(t - 1, 0) for step t = " + std::to_string(mb / m_);
              break;
          }
          const int r = s_.rank_of(q, s_.device_of[st]);
          return make_error(where(r, forward_position(r, st, mb)) + " uses version " +
                            std::to_string(row[mb].forward) + " in the version table, but " +
                            std::string(s_.custom_programs ? "custom programs"
                                                           : schedule_name(s_.kind)) +
                            " expects " + std::to_string(expected) + ": " + why);
        }
      }
    return status::success();
  }

  // Where F of (stage, microbatch) is in rank r's program (found only for a message).
  std::size_t forward_position(int r, int st, int mb) const {
    const program& prog = s_.programs[r];
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (prog[i] == action{st, action_kind::forward, mb}) return i;
    return 0;
  }
};

}  // namespace

status validate_updates(const schedule& s) { return update_checker(s).run(); }

}  // namespace pipeworks::detail
