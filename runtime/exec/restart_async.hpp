// Restarting an asynchronous schedule's checkpoint (a consistent cut with microbatches and weight
// versions in flight) as if it were taken at a step boundary, so that reshard can re-cut it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "runtime/checkpoint/rank_state.hpp"

namespace pipeworks {

// What a restart left out of one rank's state at the cut.
struct restart_drop {
  int rank = 0;
  struct held {
    int stage = 0, microbatch = 0, version = 0;
  };
  std::vector<held> microbatches;              // between their F and their last backward
  std::vector<std::pair<int, int>> versions;   // (stage, version): every version but the newest
  int messages = 0;   // activations and gradients in flight, buffered or waiting for their SEND
  std::vector<int> partial_gradients;          // stages with a gradient accumulated after STEP N
  int losses = 0;     // losses of microbatches after step N the driver had not tallied
};

struct restarted_checkpoint {
  std::int64_t step = 0;               // N: the checkpoint's step, where the restart begins
  std::vector<rank_state> states;      // rank order; each stage holds version N only, nothing in flight
  std::vector<restart_drop> dropped;   // rank order
};

// The rule: every rank of an asynchronous checkpoint is cut right after its own last STEP of
// step N, so every stage has made exactly N updates and its newest version is version N. The
// restart keeps, per stage, version N with its optimizer moments and update counts, and drops
// everything else: older versions (PipeDream's stashed ones, 2BW's second buffer), microbatches
// between F and backward (all of steps after N: a stage's STEP N follows its last backward of
// step N), messages in flight, partial gradients and untallied losses. The data goes on from step
// N (the manifest's data position), so the dropped microbatches run again from their data on the
// newest weights. A rank at another step, or a stage whose newest version is not its Nth, is
// refused naming them.
result<restarted_checkpoint> restart_at_newest(std::vector<rank_state> from);

// What the restart did, for the new manifest's "restart" field: the schedule it came from, the
// step, the rule, and per rank what was dropped (only ranks that dropped something).
nlohmann::json restart_record(const restarted_checkpoint& r, std::string_view from_schedule);

}  // namespace pipeworks
