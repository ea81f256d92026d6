// Interleaved 1F1B (Megatron-LM, Narayanan et al., 2021): v chunks per device, virtual stage
// c * p + d on device d. Microbatches go through the chunks in rounds of p, so m must be a
// multiple of p when v > 1. With v = 1 it is plain 1F1B. Synchronous: step t uses version t.
#include <algorithm>
#include <string>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

namespace {

// Appends device d's interleaved program for one step whose microbatch ids start at `first`.
void add_interleaved_step(program& prog, int d, int p, int v, int m, int first) {
  const int total = m * v;  // virtual microbatches: (chunk, microbatch) pairs
  // Virtual microbatch k runs chunk (k mod p*v) / p (reversed for backwards) on microbatch
  // (k / (p*v)) * p + k mod p, so that rounds of p microbatches sweep the chunks in turn.
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto microbatch_of = [&](int k) { return first + (k / (p * v)) * p + k % p; };
  auto fwd = [&](int k) {
    schedules::add(prog, chunk_of(k, true) * p + d, action_kind::forward, microbatch_of(k));
  };
  auto bwd = [&](int k) {
    schedules::add(prog, chunk_of(k, false) * p + d, action_kind::backward, microbatch_of(k));
  };
  // Warm-up: 2 (p - d - 1) + (v - 1) p forwards, so the last chunk's first backward can start.
  const int warmup = std::min(2 * (p - d - 1) + (v - 1) * p, total);
  for (int k = 0; k < warmup; ++k) fwd(k);
  for (int k = 0; k + warmup < total; ++k) {
    fwd(k + warmup);
    bwd(k);
  }
  for (int k = std::max(total - warmup, 0); k < total; ++k) bwd(k);
}

}  // namespace

result<schedule> interleaved(const schedule_params& params) {
  if (auto ok = schedules::check_params("interleaved", params, true); !ok)
    return error{ok.message()};
  const int p = params.stages, v = params.chunks, m = params.microbatches;
  if (v > 1 && m % p != 0) {
    const int lower = (m / p) * p, upper = lower + p;
    return make_error("interleaved with v = " + std::to_string(v) +
                      " chunks needs the microbatch count m to be a multiple of the stage count "
                      "p, because microbatches sweep the chunks in rounds of p; got m = " +
                      std::to_string(m) + ", p = " + std::to_string(p) + ". Use m = " +
                      (lower > 0 ? std::to_string(lower) + " or m = " : std::string()) +
                      std::to_string(upper) + ", or v = 1");
  }
  schedule s = schedules::start_schedule(schedule_kind::interleaved, params);
  schedules::reserve_programs(s, 2 * static_cast<std::size_t>(m) * v * params.steps);
  for (int d = 0; d < p; ++d)
    for (int t = 0; t < params.steps; ++t) {
      if (v == 1)
        schedules::add_one_f_one_b(s.programs[d], d, p, t * m, m);
      else
        add_interleaved_step(s.programs[d], d, p, v, m, t * m);
    }
  schedules::finish_flush_schedule(s);
  return s;
}

}  // namespace pipeworks
