// A rank's checkpoints as consistent cuts (Chandy–Lamport with fixed cut points): where its cuts
// fall in its program and which F's keep their input for one, the markers of its peers, what
// crosses a cut (messages recorded, credits left out) and the checkpoints open and complete. A
// named part of the executor's state; executor_snapshot.cpp records a rank's state into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint/rank_state.hpp"
#include "runtime/exec/rank_mailbox.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// A message as a checkpoint keeps it: its tensor on the host.
message on_host(message m);

// A checkpoint whose cut this rank has passed, waiting for its peers' markers.
struct open_snapshot {
  rank_state state;
  std::set<int> waiting;  // peers whose marker for state.step has not arrived
};

class cut_recorder {
 public:
  std::set<int> peers;  // ranks this rank exchanges messages with

  // The cuts of `prog`: right after this rank's last STEP of step N, for every N that is a
  // multiple of `every` and below `steps` (runtime/checkpoint/cut.hpp); and the F's whose
  // microbatch is still held at a cut (its B or I comes after it), which keep their input.
  void plan(const program& prog, std::int64_t every, std::int64_t steps);
  // The step whose cut is right before program position pc and not recorded yet, else 0.
  int due(std::size_t pc) const;
  bool keeps_input(std::size_t pc) const { return keeps_input_[pc]; }
  int recorded_step() const { return recorded_step_; }

  // The highest step of the markers `from` has sent so far (0: none).
  int marker_of(int from) { return marker_from_[from]; }
  // A message from peer `from`: recorded (on the host) by every open checkpoint whose marker
  // from that peer has not arrived; a credit after a marker is counted for later cuts.
  void note_arrival(int from, const message& msg);
  // The link credits a cut of step n records: those the rank holds, less those that came after
  // a peer's marker of step n or later; the counts of cuts up to n are then dropped.
  std::map<link_key, int> credits_at(std::map<link_key, int> credits, int n);
  // The rank passed the cut of step n with `state` (its markers sent to every peer): open until
  // every peer's marker of step n or later came.
  void open(int n, rank_state state);
  // A peer's marker: "" or why it is refused (a marker from a rank that is no peer).
  std::string on_marker(const marker_msg& mk);
  // The rank resumed at the cut of step n: every peer's marker of it counts as come.
  void restored(int n);
  // The checkpoints complete since the last call.
  std::vector<rank_state> take_complete() { return std::exchange(complete_, {}); }

 private:
  void finish(int n);

  std::vector<int> cut_before_;     // per program position: the step whose cut is before it, or 0
  std::vector<bool> keeps_input_;   // per program position: an F whose input a cut will need
  std::map<int, int> marker_from_;  // peer -> the highest step of its markers so far
  // Credits that arrived after their sender's marker of a step: (link, marker step) -> count.
  std::map<std::pair<link_key, int>, int> credits_after_marker_;
  int recorded_step_ = 0;             // the last cut this rank recorded (or resumed from)
  std::map<int, open_snapshot> open_;  // by step
  std::vector<rank_state> complete_;
};

}  // namespace pipeworks
