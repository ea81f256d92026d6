// Estimates what generating, lowering and simulating a built-in schedule would take, so that a
// request too large for this machine is refused up front instead of failing in an allocation.
#include <algorithm>
#include <cmath>

#include "runtime/simulate_internal.hpp"

#if defined(__unix__)
#include <unistd.h>
#endif

namespace pipeworks {

std::int64_t memory_limit_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) return static_cast<std::int64_t>(pages) * page / 4 * 3;
#endif
  return std::int64_t{48} << 30;  // unknown: assume a 64 GiB machine
}

footprint estimate_footprint(schedule_kind kind, const schedule_params& sp, bool simulated,
                             bool record_timeline) {
  // Counts in double: the parameters may be far too large for 64-bit products.
  const double p = sp.stages, w = sp.replicas;
  const double ids = static_cast<double>(sp.microbatches) * sp.steps;
  const double stages = p * sp.chunks;  // virtual stages
  const bool split = splits_backward(kind);
  // Compute-only: F and B (or F, I and W) per (replica, stage, microbatch), and a STEP and a
  // REDUCE per (replica, stage, step). Lowering adds SEND/RECV pairs both ways at every
  // boundary between devices.
  const double compute = w * stages * ids * (split ? 3 : 2) + w * stages * sp.steps * 2;
  const double comm = sp.stages > 1 ? 4.0 * w * ids * (stages - 1) : 0.0;
  const double actions = compute + comm;
  double bytes = (compute + actions) * sizeof(action) + stages * ids * sizeof(version_use);
  if (simulated) {
    bytes += w * stages * ids * (1 + 2 * sizeof(double));  // state bits and arrival times
    if (record_timeline) bytes += actions * sizeof(timeline_event);
  } else {
    bytes += actions * 12;  // printed: about 12 characters an action
  }
  footprint f;
  f.actions = actions < 9e18 ? static_cast<std::int64_t>(actions) : INT64_MAX;
  f.bytes = bytes;
  return f;
}

status check_footprint(schedule_kind kind, const schedule_params& sp, bool simulated,
                       bool record_timeline) {
  const footprint f = estimate_footprint(kind, sp, simulated, record_timeline);
  const double limit = static_cast<double>(memory_limit_bytes());
  const double cap = static_cast<double>(max_simulated_actions);
  if (static_cast<double>(f.actions) <= cap && f.bytes <= limit) return {};
  // Both grow about linearly in p * m: scale down to the first limit that binds.
  const double pm = static_cast<double>(sp.stages) * sp.microbatches;
  const double scale = std::min(cap / static_cast<double>(f.actions), limit / f.bytes);
  const double fits = std::floor(pm * scale);
  // When even p = m = 1 is too much, the other factors are what to lower.
  const double rest = static_cast<double>(sp.chunks) * sp.replicas * sp.steps;
  const auto whole = [](double x) { return std::to_string(static_cast<std::int64_t>(x)); };
  const std::string advice =
      fits >= 1 ? "so p * m can be at most about " + whole(fits) +
                      " here (with the same v, w and steps)"
                : "so even p = m = 1 would not fit: v * w * steps (" + whole(rest) +
                      ") can be at most about " + whole(std::floor(pm * rest * scale)) +
                      " here; lower the steps, replicas or chunks";
  return make_error(
      std::string(simulated ? "simulate" : "schedule") + ": " +
      std::string(schedule_name(kind)) + " with p=" + std::to_string(sp.stages) +
      " m=" + std::to_string(sp.microbatches) + " v=" + std::to_string(sp.chunks) +
      " w=" + std::to_string(sp.replicas) + " steps=" + std::to_string(sp.steps) +
      " would take about " + std::to_string(f.actions) + " actions and " +
      sim_detail::bytes_text(f.bytes) + " of memory (programs" +
      (simulated ? std::string(", simulator state") + (record_timeline ? ", timeline" : "")
                 : std::string(", printed text")) +
      "); the limits are 2^28 = " + std::to_string(max_simulated_actions) + " actions and " +
      sim_detail::bytes_text(limit) + " (3/4 of this machine's memory), " + advice);
}

}  // namespace pipeworks
