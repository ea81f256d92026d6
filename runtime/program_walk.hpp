// What each action of a pipeline program waits for and what running it makes available to other
// ranks, and a walker that runs every rank's program with free compute on that description.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/huge_pages.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// A link carries one direction between two neighbouring virtual stages of one replica; it is
// named by the stage that consumes what travels on it.
struct link_id {
  int replica = 0;
  int stage = 0;        // the consumer: s + 1 for an activation of s, s - 1 for a gradient of s
  bool forward = true;  // activations (true) or gradients (false)
  bool operator==(const link_id&) const = default;
};

// An activation (forward) or gradient for (replica, consumer stage, microbatch).
struct message_id {
  link_id link;
  int microbatch = 0;
  bool operator==(const message_id&) const = default;
};

// The k-th REDUCE of a virtual stage (k counts from 0), which every replica of the stage runs.
struct reduce_id {
  int stage = 0;
  int occurrence = 0;
  bool operator==(const reduce_id&) const = default;
};

enum class wait_kind : std::uint8_t {
  nothing,  // runs at once: W, STEP, B or I of the last stage, REDUCE with one replica
  input,    // the driver's input for `awaited` (F of virtual stage 0)
  message,  // the activation or gradient `awaited`
  credit,   // a free slot on `awaited.link` (a SEND; a window of 0 always has one)
  reduce,   // every replica of the stage at REDUCE `reduce` (a rank arrives when it reaches it);
            // under the p2p reduce, the previous replica's REDUCE `reduce` (none for replica 0)
  version,  // p2p, a STEP of a replica but the last: the last replica's STEP `reduce` ran
};

enum class make_kind : std::uint8_t {
  nothing,
  message,         // `made` (SEND, or F/B/I whose consumer takes it without a SEND)
  credit,          // a credit back on `made.link` (RECV: the message is consumed)
  reduce_arrival,  // REDUCE `reduce` ran; the other replicas (p2p: the next one) may pass it too
  version,         // p2p, the last replica's STEP `reduce` ran: the others' STEP may take it
};

struct action_flow {
  wait_kind waits = wait_kind::nothing;
  make_kind makes = make_kind::nothing;
  message_id awaited;  // input, message: the message; credit: awaited.link
  message_id made;     // message: the message; credit: made.link
  reduce_id reduce;    // wait reduce or version, make reduce_arrival or version
  // A message wait that an earlier action of this rank's own program satisfies (its RECV, or the
  // previous stage on the same device): a walk over valid programs never blocks on it.
  bool awaited_local = false;
  // A message made for a stage on this rank: no other rank waits for it.
  bool made_local = false;
};

// What action `a` of a program of replica `replica` waits for and makes. `lowered`: the programs
// carry SEND/RECV pairs (a RECV waits for its SEND; F and B read what the RECV or the stage on
// the same device left); otherwise compute-only (F and B wait for the producing F, or B or I, of
// the neighbouring stage). `reduces_before`: the REDUCEs (for a REDUCE; for a STEP, the STEPs)
// of a.stage this rank ran before `a`, which names its occurrence. The stage and its neighbours
// must exist in `s`.
action_flow describe_action(const schedule& s, bool lowered, int replica, const action& a,
                            int reduces_before = 0);

struct walk_options {
  bool lowered = true;        // see describe_action
  int credit_window = 0;      // unconsumed messages per link before a SEND waits; 0: unbounded
  bool record_steps = false;  // keep the logical step of every action (steps())
};

// Runs every rank's program with free compute: a rank advances while its next action's wait
// (describe_action) is met, and a rank that blocks is woken when what it waits for is made.
// Each action runs once and each wake-up follows one made message, credit or REDUCE arrival, so a
// walk is linear in the number of actions. The logical step of an action is 1 + max(the step of
// the previous action on its rank, the step of what it waited for): the SEND of a message, the
// RECV that returned its credit, the latest arrival at its REDUCE. The programs must pass the
// validator's layout checks (stages, devices and microbatch ids in range).
class program_walker {
 public:
  program_walker(const schedule& s, walk_options options);

  // Walks until every rank finished or is blocked; true when all finished.
  bool run();

  // [rank]: the next action, or the program's size when it finished.
  const std::vector<std::size_t>& positions() const { return pc_; }
  // Ranks that did not finish, in order.
  std::vector<int> stuck() const;
  // [rank]: the logical step of its last action, -1 before its first.
  const std::vector<int>& last_steps() const { return last_step_; }
  // [rank][position]: the logical step each action ran at, -1 if it did not (record_steps only).
  const std::vector<std::vector<int>>& steps() const { return step_at_; }

 private:
  void advance(int r);
  void wake(int r);
  bool arrive_at_reduce(int r, const reduce_id& id, int& dep);
  bool chain_ran(const std::vector<std::vector<int>>& steps, int replica, const reduce_id& id,
                 int& dep) const;
  std::size_t slot(const message_id& m) const {
    return (static_cast<std::size_t>(m.link.replica) * stages_ + m.link.stage) * mbs_ +
           m.microbatch;
  }
  std::size_t link_index(const link_id& l) const {
    return (static_cast<std::size_t>(l.replica) * stages_ + l.stage) * 2 + (l.forward ? 0 : 1);
  }
  int rank_of(int replica, int stage) const { return s_.rank_of(replica, s_.device_of[stage]); }

  const schedule& s_;
  walk_options o_;
  int p_ = 1, w_ = 1, stages_ = 1, ranks_ = 0;
  std::size_t mbs_ = 0;
  std::vector<std::size_t> pc_;
  std::vector<char> blocked_;
  std::vector<int> last_step_;
  std::vector<std::vector<int>> step_at_;
  big_vector<int> made_f_, made_b_;        // [slot(message)]: the step that made it, -1 until then
  std::vector<int> sends_, recvs_;         // [link] with a credit window: messages sent, received
  std::vector<int> credit_step_;           // [link * window + n % window]: step of RECV n
  std::vector<int> reduces_done_;          // [replica * stages + stage]
  std::vector<std::vector<int>> arrived_count_, arrived_step_;  // [stage][occurrence]
  std::vector<std::vector<int>> passed_count_;  // [stage][occurrence]: replicas past the REDUCE
  std::vector<char> arrived_;              // [rank]: counted at the REDUCE it is at
  // p2p: [replica * stages + stage][occurrence], the step at which that REDUCE (or STEP) ran.
  std::vector<std::vector<int>> chain_reduce_step_, chain_step_step_;
  std::vector<int> steps_done_;            // [replica * stages + stage] (p2p)
  std::vector<int> worklist_;
};

// The smallest credit window per link that runs the lowered schedule without deadlock (at most
// the largest number of messages any link carries); every larger window is also safe.
int min_credit_window(const schedule& lowered);

}  // namespace pipeworks
