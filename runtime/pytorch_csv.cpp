// One pipeline for one optimizer step, in the form PyTorch's pipelining runtime loads; see
// pytorch_csv.hpp.
#include "runtime/pytorch_csv.hpp"

#include <string>
#include <vector>

namespace pipeworks {

namespace {

// The actions with a microbatch each form keeps: compute_comms adds its own REDUCE_GRAD.
bool keeps(pytorch_form form, action_kind k) {
  return is_compute(k) || k == action_kind::overlap_f_b ||
         (form == pytorch_form::compute_comms && is_comm(k));
}

// The first place on a rank where an action of a later step comes before one of an earlier
// step, or -1. REDUCE and STEP belong to the step whose count they close on their stage.
long long overlap_at(const schedule& s, const program& prog) {
  const int m = s.params.microbatches;
  std::vector<int> updates(s.virtual_stages, 0);  // STEPs seen per stage on this rank
  int latest = 0;                                  // the latest step begun so far
  for (std::size_t i = 0; i < prog.size(); ++i) {
    const action& a = prog[i];
    if (a.kind == action_kind::overlap_f_b) continue;  // of the step of the F it joins, next
    int t = 0;
    if (a.kind == action_kind::step) t = updates[a.stage]++;
    else if (a.kind == action_kind::reduce) t = updates[a.stage];
    else t = a.microbatch / m;
    if (t < latest) return static_cast<long long>(i);
    latest = t;
  }
  return -1;
}

}  // namespace

result<std::vector<program>> pytorch_programs(const schedule& s, pytorch_form form, int replica,
                                              int step) {
  const int p = s.params.stages, w = s.params.replicas, steps = s.params.steps;
  const int m = s.params.microbatches;
  if (replica < 0 || replica >= w)
    return make_error("replica " + std::to_string(replica) + " is not one of the schedule's " +
                      std::to_string(w) + " (0.." + std::to_string(w - 1) + ")");
  if (step < 0 || step >= steps)
    return make_error("step " + std::to_string(step) + " is not one of the schedule's " +
                      std::to_string(steps) + " (0.." + std::to_string(steps - 1) + ")");
  if (s.routes > 1)
    return make_error(std::string(schedule_name(s.kind)) + " feeds microbatches from both ends "
                      "through mirrored copies of the stages, which PyTorch's CSV cannot say: its "
                      "stage indices are one route through the model, so stages " +
                      std::to_string(s.route_stages()) + ".." + std::to_string(s.virtual_stages - 1) +
                      " would read as further model pieces; print pipeworks' own text instead "
                      "(`pipeworks schedule` without --pytorch)");
  if (form == pytorch_form::compute_comms && !s.lowered)
    return make_error("the compute_comms form needs a lowered schedule (with SEND/RECV)");
  if (steps > 1)
    for (int d = 0; d < p; ++d) {
      const program& prog = s.programs[s.rank_of(replica, d)];
      if (const long long i = overlap_at(s, prog); i >= 0)
        return make_error(std::string(schedule_name(s.kind)) +
                          " has no flush between optimizer steps: rank " +
                          std::to_string(s.rank_of(replica, d)) + " runs " +
                          to_string(prog[static_cast<std::size_t>(i)]) +
                          " of an earlier step after the next step began, and PyTorch's runtime "
                          "runs each step() to the end; write it with --steps 1, or keep "
                          "pipeworks' own --csv");
    }
  std::vector<program> rows(p);
  for (int d = 0; d < p; ++d) {
    const program& prog = s.programs[s.rank_of(replica, d)];
    std::vector<int> backwards(s.virtual_stages, 0);  // B and W of this step, per stage
    program& row = rows[d];
    // PyTorch's _add_reduce_grad: a REDUCE_GRAD after a stage's m-th B or W, with or without
    // data parallelism; here after that backward's SEND_B, so the previous stage need not wait
    // for the all-reduce (where pipeworks puts its REDUCE when w > 1).
    int pending = -1;  // the stage whose REDUCE_GRAD is due
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const action& a = prog[i];
      // An OVERLAP_F_B belongs to the step of the F it joins, the next action.
      const action& owner =
          a.kind == action_kind::overlap_f_b && i + 1 < prog.size() ? prog[i + 1] : a;
      if (!has_microbatch(owner.kind) || owner.microbatch / m != step || !keeps(form, a.kind))
        continue;
      if (pending >= 0 && !(a.kind == action_kind::send_b && a.stage == pending)) {
        row.push_back(action{pending, action_kind::reduce, -1});
        pending = -1;
      }
      row.push_back(a);
      if (has_microbatch(a.kind)) row.back().microbatch = a.microbatch - step * m;
      const bool closes = a.kind == action_kind::backward || a.kind == action_kind::weight_grad;
      if (form == pytorch_form::compute_comms && closes && ++backwards[a.stage] == m)
        pending = a.stage;
    }
    if (pending >= 0) row.push_back(action{pending, action_kind::reduce, -1});
  }
  return rows;
}

std::string to_pytorch_csv(const std::vector<program>& rows) {
  std::string out;
  for (const program& p : rows) {
    bool first = true;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const action& a = p[i];
      if (a.kind == action_kind::step) continue;
      if (!first) out += ',';
      first = false;
      if (a.kind == action_kind::overlap_f_b && i + 2 < p.size()) {  // one cell, as PyTorch's
        out += to_string(program(p.begin() + static_cast<std::ptrdiff_t>(i),
                                 p.begin() + static_cast<std::ptrdiff_t>(i) + 3));
        i += 2;
        continue;
      }
      out += a.kind == action_kind::reduce ? std::to_string(a.stage) + "REDUCE_GRAD" : to_string(a);
    }
    out += '\n';
  }
  return out;
}

}  // namespace pipeworks
