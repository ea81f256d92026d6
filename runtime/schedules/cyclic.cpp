// Cyclic data parallelism (Fournier & Oyallon, "Cyclic Data Parallelism for Efficient
// Parallelism of Deep Neural Networks", arXiv:2403.08837, 2024) on pipelines with w replicas.
//
// The paper's N workers start their micro-batches one after another with a uniform delay of 1/N
// of a cycle, so the activation memory stays constant and each layer's gradient is reduced as
// soon as every worker has finished that layer's backward, spread over the step instead of all at
// its end. Here the workers are the w replicas (each a 1F1B pipeline over p devices; within a
// replica the microbatches already enter one slot apart, so each stage holds a constant p - s
// activations). Replica q is phase-shifted by q/w of a cycle of m microbatches: its update of
// step t, [REDUCE s] STEP s on every stage s, comes after its backward of microbatch
//   b_q(t) = (t + 1) m - 1 + off_q,   off_q = floor(q m / w),
// (the last step's after its last backward), i.e. off_q microbatches of step t + 1 later than in
// pipedream-vs. A REDUCE synchronises the replicas of a stage (simulator and runtime), so the
// shift cannot be a delay in time after the first step: replicas 0 .. w-2 wait at the first
// REDUCE (the paper's staggered start) and run in step afterwards, each stage reduces its own
// gradients as soon as its backwards for the step are done on every replica, and replica q keeps
// running microbatches of step t + 1 (gradients in a second buffer) until REDUCE s of step t. The
// reductions of the stages fall at different times, one slot apart per stage as the backward
// wave passes. With w = 1 there is no shift and the programs are those of pipedream-vs.
//
// Under the point-to-point reduce (schedule_params::reduce = p2p) no REDUCE synchronises: it is a
// chain 0 -> 1 -> ... -> w-1 of partial sums, each replica's at its own time, and replica w-1
// updates alone and sends the new version on. The replicas then run in step from the start, and
// replica q < w-1 places its STEP of step t (taking version t+1) just before its first F that
// uses version t+1, where the last replica's update has just been made.
//
// Version rule (the paper's "first part of the cycle uses theta_{t-1}, the rest theta_t"), the
// same on every stage and replica: with split = min(m, p - 1 + off_{w-1}),
//   microbatch k of step t >= 1 uses version t - 1 if k < split, else version t; step 0 uses 0.
// Microbatch k < split of step t has entered stage 0 of the furthest-shifted replica before its
// update of step t - 1. Version t - 1 must exist before step t begins, which needs
// p - 1 + off_{w-1} <= m, i.e. ceil(m / w) >= p - 1; then at most two versions are live.
#include <algorithm>
#include <string>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

namespace {

// Replica q's phase shift in microbatches.
int shift_of(int q, int m, int w) { return static_cast<int>(static_cast<long long>(q) * m / w); }

// The step whose update follows the backward of microbatch `id` on a replica shifted by `off`,
// or -1 when none does.
int step_closed_by(int id, int off, int m, int steps) {
  const int total = m * steps;
  if (id == total - 1) return steps - 1;
  const int n = id + 1 - off;
  if (n <= 0 || n % m != 0) return -1;
  const int t = n / m - 1;
  return t < steps - 1 ? t : -1;
}

}  // namespace

int cyclic_version_split(const schedule_params& params) {
  const int w = params.replicas, m = params.microbatches;
  return std::min(m, params.stages - 1 + shift_of(w - 1, m, w));
}

result<schedule> cyclic(const schedule_params& params) {
  if (auto ok = schedules::check_params("cyclic", params, false); !ok) return error{ok.message()};
  const int p = params.stages, m = params.microbatches, w = params.replicas;
  const int per_replica = m - shift_of(w - 1, m, w);  // ceil(m / w)
  if (per_replica < p - 1) {
    const int need = std::max(1, w * (p - 2) + 1);
    return make_error("cyclic with w = " + std::to_string(w) + " replicas needs ceil(m / w) >= "
                      "p - 1, so that version t-1 exists on every stage before step t begins on "
                      "the furthest-shifted replica; got m = " + std::to_string(m) + ", p = " +
                      std::to_string(p) + ". Use m >= " + std::to_string(need) +
                      (w > 1 ? " (or fewer replicas)" : ""));
  }
  schedule s = schedules::start_schedule(schedule_kind::cyclic, params);
  const int total = m * params.steps;
  const int split = cyclic_version_split(params);
  auto version_of = [&](int mb) {
    const int t = mb / m, k = mb % m;
    return t > 0 && k < split ? t - 1 : t;
  };
  for (int q = 0; q < w; ++q) {
    const int off = shift_of(q, m, w);
    // Under p2p a replica other than the chain's last takes its new version from the last one,
    // which reaches its update later: its STEP waits until just before the first F that uses the
    // version, so that the replicas never wait for each other at the REDUCE.
    const bool deferred = !runs_update(params, q);
    for (int d = 0; d < p; ++d) {
      program stream;
      stream.reserve(2 * static_cast<std::size_t>(total));
      schedules::add_one_f_one_b(stream, d, p, 0, total);
      program& out = s.programs[s.rank_of(q, d)];
      // Room for the updates and for the SEND/RECV pairs lowering adds (see reserve_programs).
      out.reserve(3 * stream.size() + 2 * static_cast<std::size_t>(params.steps));
      int pending = -1;  // the step whose deferred STEP has not been placed yet
      auto place_step = [&] {
        out.push_back(action{d, action_kind::step, -1});
        pending = -1;
      };
      for (const action& a : stream) {
        if (pending >= 0 && a.kind == action_kind::forward && version_of(a.microbatch) > pending)
          place_step();
        out.push_back(a);
        if (a.kind != action_kind::backward) continue;
        const int t = step_closed_by(a.microbatch, off, m, params.steps);
        if (t < 0) continue;
        if (pending >= 0) place_step();
        if (w > 1) out.push_back(action{d, action_kind::reduce, -1});
        if (deferred)
          pending = t;
        else
          place_step();
      }
      if (pending >= 0) place_step();
    }
  }
  s.versions.assign(s.virtual_stages, std::vector<version_use>(total));
  for (auto& row : s.versions)
    for (int mb = 0; mb < total; ++mb) row[mb] = {version_of(mb), version_of(mb)};
  s.version_rule = "cyclic: microbatch k of step t uses version t-1 if k < min(m, p-1 + "
                   "floor((w-1)m/w)) (it enters before the last-shifted replica's step t-1 "
                   "update), else version t; step 0 uses 0";
  return s;
}

}  // namespace pipeworks
