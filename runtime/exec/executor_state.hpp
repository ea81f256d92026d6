// The state behind stage_executor<T>: per virtual stage its weight versions, stashes, gradients
// and optimizer; per rank the message buffers, credits and trace. Only executor.cpp includes it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/exec/executor.hpp"

namespace pipeworks {

// What F(k) keeps for B(k) (or I(k)), and what I(k) keeps for W(k).
template <class T>
struct held_microbatch {
  stage_stash stash;
  int version = 0;
  std::int64_t bytes = 0;       // stashed activation bytes (after I: what W still needs)
  std::optional<stage_deferred> later;  // after I: what the weight-gradient half W needs
};

template <class T>
struct virtual_stage_state {
  int stage = 0;
  int latest = 0;                          // versions made so far (STEPs done)
  std::map<int, param_snapshot> versions;  // kept: the latest, and any a later F names
  std::map<int, int> live;                 // version -> references (kept + held microbatches)
  std::map<int, held_microbatch<T>> held;  // by microbatch
  std::map<int, std::size_t> last_named;   // version -> 1 + the index of the last F naming it
  std::size_t forwards_done = 0;
  param_set grads;
  std::optional<stage_optimizer<T>> optimizer;
  bool reduce_sent = false;
  std::optional<reduce_result> reduced;
  std::int64_t activation_bytes = 0;
  stage_stats stats;

  void ref(int v) { ++live[v]; }
  void unref(int v) {
    if (--live[v] == 0) live.erase(v);
  }
  void note_peaks() {
    stats.peak_versions = std::max(stats.peak_versions, static_cast<int>(live.size()));
    stats.peak_inflight = std::max(stats.peak_inflight, static_cast<int>(held.size()));
    stats.peak_activation_bytes = std::max(stats.peak_activation_bytes, activation_bytes);
  }
};

using message_key = std::pair<int, int>;  // (consumer stage, microbatch)

}  // namespace pipeworks
