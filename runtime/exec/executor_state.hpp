// The state behind stage_executor<T>: per virtual stage its weight versions, stashes, gradients
// and optimizer; per rank the message buffers, credits, trace, and the checkpoints being
// recorded. Included only by the executor's own .cpp files (actions, snapshots).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "runtime/exec/compute_timer.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/exec/trace_recorder.hpp"

namespace pipeworks {

// What F(k) keeps for B(k) (or I(k)), and what I(k) keeps for W(k).
template <class T>
struct held_microbatch {
  stage_stash stash;
  int version = 0;
  std::int64_t bytes = 0;       // stashed activation bytes (after I: what W still needs)
  std::optional<stage_deferred> later;  // after I: what the weight-gradient half W needs
  tensor input;  // with checkpoints, before I: the F's input, from which a restore recomputes
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

// A buffered input and when it came: the highest checkpoint marker its sender had sent before
// it (0: none), so a checkpoint keeps only what was sent before the sender's cut.
template <class Msg>
struct buffered {
  Msg msg;
  int after_marker = 0;
  bool from_driver = false;  // an input of virtual stage 0: asked for again on resume
};

// A checkpoint whose cut this rank has passed, waiting for its peers' markers.
struct open_snapshot {
  rank_state state;
  std::set<int> waiting;  // peers whose marker for state.step has not arrived
};

template <class T>
struct stage_executor<T>::impl {
  const model<T>& model_;
  executor_setup setup;
  sink send;
  device_context context;  // where the kernels run: run() enters it
  const schedule& plan;
  const program& prog;
  int p, S, m, w, rank;
  std::size_t pc = 0;
  std::vector<virtual_stage_state<T>> stages;  // this rank's virtual stages, in stage order
  std::vector<int> index_of;                   // virtual stage -> index in stages, or -1
  std::map<message_key, buffered<activation_msg>> inbox_f;
  std::map<message_key, buffered<gradient_msg>> inbox_b;
  std::map<message_key, activation_msg> out_f;  // F(s,k)'s output, for SEND_F(s,k)
  std::map<message_key, tensor> out_b;          // B(s,k)'s input gradient, for SEND_B(s,k)
  std::map<std::pair<int, bool>, int> credits;  // (consumer stage, forward) -> sends left
  std::vector<int> stage0_inputs;               // microbatches of virtual stage 0's F's, in order
  int next_input = 0;                           // index into stage0_inputs of the next request
  std::string bad_message;                      // set by deliver(); run() reports it
  int peak_buffered = 0;
  int rank_peak_inflight = 0;
  std::int64_t rank_peak_bytes = 0;
  double wait_start = -1;                       // when the current action started waiting
  bool killed = false;
  bool natural_latest;  // the rule is "the latest version when F runs": checked as it runs
  compute_timer timer;
  trace_recorder trace;

  // Global clipping: the squared global norm of each step, once the driver has summed it.
  std::map<int, double> global_sq;
  int norms_sent = -1;  // the last step whose squared norms were sent
  // Losses this rank reported whose step a checkpoint may not have seen complete.
  std::map<int, loss_report> recent_losses;  // by microbatch
  std::vector<loss_report> resend_losses;    // a restored rank's, reported again at start()

  // Checkpoints: the step (steps done) whose cut is right before program position i, or 0.
  std::vector<int> cut_before;
  std::vector<bool> keeps_input;        // per program position: an F whose input a cut will need
  std::set<int> peers;                  // ranks this rank exchanges messages with
  std::map<int, int> marker_from;       // peer -> the highest step of its markers so far
  // Credits that arrived after their sender's marker of a step: (link, marker step) -> count.
  std::map<std::pair<std::pair<int, bool>, int>, int> credits_after_marker;
  int recorded_step = 0;                // the last cut this rank recorded (or resumed from)
  std::map<int, open_snapshot> open;    // by step
  std::vector<rank_state> done;         // complete, for take_snapshots()

  impl(const model<T>& mdl, executor_setup su, sink out);
  void init_stages(std::vector<param_set> initial);
  void init_program_tables();

  // executor.cpp: the actions.
  double now() const { return timer.now(); }
  int rank_of_stage(int s) const { return plan.rank_of(setup.replica, plan.device_of[s]); }
  virtual_stage_state<T>& state(int s);
  bool runs(int s) const { return s >= 0 && s < S && index_of[s] >= 0; }
  int total() const { return plan.total_microbatches(); }
  void emit(endpoint_kind kind, int index, message msg);
  void request_inputs();
  void release_versions(virtual_stage_state<T>& st);
  void note_rank_peaks();
  void note_buffered();
  std::string where(const action& a) const;
  bool fault_here(const action& a, fault_kind k) const {
    return fault_at(setup.fault, k, setup.replica, a);
  }
  bool ready(const action& a);
  bool has_credit(int consumer, bool forward);
  void take_credit(int consumer, bool forward);
  void send_reduce(const action& a, virtual_stage_state<T>& st);
  // What leaves the rank for rank `to`: a GPU tensor stays one when `to` is on the same GPU in
  // the same process (once this rank's stream has finished it), else it crosses to the host.
  tensor to_wire(tensor t, int to) const;
  // A weight version on the host (for the driver and checkpoints), and on this rank's device.
  param_snapshot host_version(const param_snapshot& p) const;
  param_snapshot here_version(const param_snapshot& p) const;
  void send_norms(int step);
  void run_forward(const action& a);
  void run_backward(const action& a);
  void run_weight_grad(const action& a);
  void run_reduce(const action& a);
  void run_step(const action& a);
  void run_send(const action& a);
  void run_recv(const action& a);
  void execute(const action& a);
  result<bool> run();
  void deliver(message msg);
  std::string waiting_for() const;

  // executor_snapshot.cpp: checkpoints.
  int sender_of(const message& msg) const;  // the rank that sent it; -1: the driver or a reducer
  void note_arrival(int from, const message& msg);
  void record_snapshot(int step);
  void on_marker(const marker_msg& mk);
  void finish_snapshot(int step);
  void restore(rank_state state);
};

}  // namespace pipeworks
