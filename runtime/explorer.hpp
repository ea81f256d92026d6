// The schedule explorer (issue 30): a timeline with, for each action, what it waited for, the
// weight version it used and the rule that chose it, and per rank the state at each moment, as
// JSON that one self-contained HTML page (runtime/explorer/explorer.html) shows offline.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/schedule.hpp"
#include "runtime/simulate.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

// The most actions one page holds: its states grow with actions times ranks, and a browser
// slows past this. A larger schedule is refused with advice; a larger trace is cut (see below).
constexpr std::int64_t max_explorer_actions = 20000;
// The most actions times ranks: the page rebuilds a state of every rank at each action's start
// and end, so many ranks need fewer actions. 20,000 actions on 4 ranks make a page of about
// 10 MB (the states stored as deltas; 20 MB when each held every rank).
constexpr std::int64_t max_explorer_cells = 250'000;

// The page's data for a simulation of `lowered` (a lowered, validated schedule) on `costs`, its
// timeline recorded. Every number is the simulator's: "makespan", "bubble_fraction", "ranks"
// (per rank: "actions", the timeline's events on that rank, peak_stashed, peak_live_versions,
// peak_bytes (stashes and live versions), peak_stash_bytes, and "simulated": busy,
// peak_inflight, peak_versions, peak_activation_bytes, peak_memory_bytes, finish), "bytes" (where
// the bytes come from: the cost model, the run, or unknown), "actions" (one per timeline event:
// rank, stream, text, kind, stage, microbatch, start, end, version, "waited", "sent", "rule"),
// and "states" (at each time an action starts or ends, per rank: live weight versions, stashed
// microbatches, bytes held ("bytes": stashes and live versions; "stash_bytes"), the actions
// waiting on a message; stored as deltas: the first state's "ranks" holds every rank, each later
// state's "changed" only the ranks whose state changed, by rank number, which the page
// rebuilds), "start" 0. An error for a schedule over max_explorer_actions or
// max_explorer_cells, naming it and the limit.
result<std::string> explorer_json(const schedule& lowered, const cost_model& costs,
                                  const simulation& sim);

// A window of a trace: its optimizer steps `first` to `last`, counted from 1 as train's metrics
// count them; 0 leaves that end open (the first step, the last step). {0, 0}: the whole trace.
struct step_window {
  int first = 0;
  int last = 0;
  bool whole() const { return first == 0 && last == 0; }
};

// The step of each event of `t` (indices as t.events), counted from 1: on each rank, each stage's
// actions belong to the step that the stage's next STEP ends, the STEP included; actions after a
// stage's last STEP belong to a step of their own that has not ended.
std::vector<int> steps_of(const timeline& t);

// What is wrong with `w` as a window of a trace of `steps` steps: `end` says which end (none
// when nothing is), `message` why: before step 1, after the last step, the last before the first.
struct window_problem {
  enum which { none, first, last } end = none;
  std::string message;
};
window_problem check_window(const step_window& w, int steps);

// The page's data for a measured timeline (a real run's trace, read back by read_chrome_trace):
// the same fields, with no version rule (a trace holds none), waits found by each action's stage
// and microbatch and by the flows of SEND and RECV. Bytes as the run recorded them
// (timeline_event::bytes): each stash holds its F's bytes (its B's or I's while they run, its W's
// after its I), each live version its stage's STEP's. A trace without them (an older one, or a
// simulated one) gives null bytes, which the page shows as unknown, and "bytes" says why.
// `window` (steps_of's steps) shows the time from the first start of its steps' actions to the
// last end, and every action that runs then (its steps' and what overlaps them on other ranks);
// "start" is that time, "makespan" and "bubble_fraction" the window's length and idle share,
// "window" its steps, and the first state is the whole trace's at the window's start (the
// versions live and the microbatches stashed then). A bad window is an error naming its end.
// A page over max_explorer_actions (or max_explorer_cells / ranks) keeps that many of its first
// actions by start time, its states up to the first one left out, and says so in "note".
result<std::string> explorer_json(const timeline& measured, const step_window& window = {});

// Two schedules on one page: `first`'s data with `second`'s under "compare", drawn below it on
// the same time axis. Both must be explorer_json's; an error names the one that does not parse.
result<std::string> explorer_compare_json(const std::string& first, const std::string& second);

// The page: the template (runtime/explorer/explorer.html, embedded at build time) with `json`
// embedded as a <script type="application/json" id="pipeworks-data"> element ("</" escaped).
std::string explorer_html(const std::string& json);

// The embedded JSON of a page that explorer_html wrote, unescaped; an error if there is none.
result<std::string> explorer_data_of(const std::string& html);

}  // namespace pipeworks
