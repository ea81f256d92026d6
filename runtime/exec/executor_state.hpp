// The state behind stage_executor<T>: per virtual stage its weight versions, stashes, gradients
// and optimizer; per rank its named parts (the mailbox of messages and credits, the checkpoint
// cut recorder, the reports to the driver, the peaks), its trace and its timer. Included only by
// the executor's own .cpp files (actions, snapshots).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "runtime/exec/compute_timer.hpp"
#include "runtime/exec/cut_recorder.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/exec/rank_mailbox.hpp"
#include "runtime/exec/trace_recorder.hpp"

namespace pipeworks {

// The bytes of the tensors a stage's forward stashed, all its blocks together.
inline std::int64_t stash_bytes(const std::vector<stash>& saved) {
  std::int64_t bytes = 0;
  for (const stash& s : saved)
    for (const tensor& t : s.saved) bytes += static_cast<std::int64_t>(t.nbytes());
  return bytes;
}

// What F(k) keeps for B(k) (or I(k)), and what I(k) keeps for W(k).
template <class T>
struct held_microbatch {
  stage_stash stash;
  int version = 0;
  std::int64_t bytes = 0;       // held activation bytes (after I: what W still needs)
  std::int64_t stash_bytes = 0;  // the bytes of the F's whole stash, whether held or not
  std::optional<stage_deferred> later;  // after I: what the weight-gradient half W needs
  // Before I, with checkpoints or recomputation: the F's input, from which a restore (and, with
  // recompute full, the B or I) runs the forward again.
  tensor input;
  bool recomputes = false;  // recompute full: the stash is not held; B or I makes it again
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
  // ZeRO: the reduced gradient's squared norm per tensor, when its owners computed them (stage
  // 2); the update is made and sent to the reducer (gather_sent) before STEP can run, which
  // installs the version the owners' tensors make together (gathered).
  std::vector<double> squares;
  std::vector<bool> owned;  // per tensor: this replica's (empty: all)
  bool gather_sent = false;
  std::optional<reduce_result> gathered;
  double step_norm = 0, step_started = 0, step_ended = 0;  // of the update made before the gather
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

// What a rank and the driver exchange besides inputs: under global clipping the squared norms
// sent and the global sums that came back, and the losses a checkpoint may report again.
struct step_reports {
  std::map<int, double> global_sq;  // by step, once the driver has summed it
  int norms_sent = -1;              // the last step whose squared norms were sent
  // Losses this rank reported whose step a checkpoint may not have seen complete.
  std::map<int, loss_report> recent_losses;  // by microbatch
  std::vector<loss_report> resend_losses;    // a restored rank's, reported again at start()
};

// An F or a B/I between its bookkeeping before and after: its compute (the blocks' kernels) is
// all that touches nothing of the rank's, so that two of them can run at once (OVERLAP_F_B).
template <class T>
struct compute_job {
  action a;
  int version = 0;
  param_snapshot weights;  // F: the version it runs
  activation_msg in;        // F: the activation it came with
  tensor input, kept;       // F: its input, and the copy kept for a cut or recompute full
  stage_forward out;        // F: what the blocks made
  held_microbatch<T>* held = nullptr;  // B or I: its forward's stash
  tensor dout, din;         // B or I: the output gradient, and the input gradient made
  stage_deferred later;     // I: what W needs
  bool recomputed = false;  // B or I: the stash was made again first (recompute full)
};

// The rank's peaks over all its virtual stages at once.
struct rank_peaks {
  int inflight = 0;                  // microbatches held
  std::int64_t activation_bytes = 0;  // stashed activation bytes
};

template <class T>
struct stage_executor<T>::impl {
  const model<T>& model_;
  executor_setup setup;
  sink send;
  // What the rank's host tensors and moments hold, charged as they are made (ops/memory_account).
  std::shared_ptr<memory_account> account;
  device_context context;  // where the kernels run: run() enters it
  // A GPU rank's second stream (its own allocator and cuBLAS handle), made for the first
  // OVERLAP_F_B pair: the pair's F runs there while its B runs on `context`.
  std::optional<device_context> side;
  const schedule& plan;
  const program& prog;
  int rank;  // replica * p + device
  std::size_t pc = 0;
  std::vector<virtual_stage_state<T>> stages;  // this rank's virtual stages, in stage order
  std::vector<int> index_of;                   // virtual stage -> index in stages, or -1
  rank_mailbox mail;    // inboxes, outputs waiting for their SEND, credits, inputs asked for
  cut_recorder cuts;    // checkpoints as consistent cuts
  step_reports reports;  // norms to and from the driver, losses to report again
  rank_peaks peaks;
  std::string bad_message;  // set by deliver(); run() reports it
  double wait_start = -1;   // when the current action started waiting
  bool killed = false;
  compute_timer timer;
  trace_recorder trace;

  impl(const model<T>& mdl, executor_setup su, sink out);
  // Tensors that outlive the rank are no longer charged, nor are later allocations of a worker
  // thread that still names the account (ops/memory_account.hpp).
  // The copies still queued on the GPU (an offloaded stash's, a prefetch's) end before the
  // stashes they read or write go back to their allocators with the members.
  ~impl() {
    for (device_context* c : {side ? &*side : nullptr, &context}) {
      try {
        if (c) c->wait();
      } catch (...) {  // a GPU in error: its memory goes with it
      }
    }
    if (account) account->close();
  }
  void init_stages(std::vector<param_set> initial);
  void init_program_tables();

  // executor.cpp: the actions.
  double now() const { return timer.now(); }
  int rank_of_stage(int s) const { return plan.rank_of(setup.replica, plan.device_of[s]); }
  virtual_stage_state<T>& state(int s);
  bool runs(int s) const { return s >= 0 && s < plan.virtual_stages && index_of[s] >= 0; }
  // Routes (dualpipe): the driver and the reducer count a stage's copy as a member of its reduce
  // (schedule::member), each with its own microbatches; with one route, the replica.
  int member_of(int s) const { return plan.member(s, setup.replica); }
  // The stage of this rank whose piece a reducer's answer names (with one route, the stage).
  int stage_of_piece(int piece) const {
    for (const auto& st : stages)
      if (plan.piece_of(st.stage) == piece) return st.stage;
    return -1;
  }
  int total() const { return plan.total_microbatches(); }
  void emit(endpoint_kind kind, int index, message msg);
  void request_inputs();
  void release_versions(virtual_stage_state<T>& st);
  void note_rank_peaks();
  // The rule is "the latest version when F runs": checked as it runs.
  bool natural_latest() const {
    return is_flush(plan.kind) || plan.kind == schedule_kind::pipedream || plan.custom_programs;
  }
  std::string where(const action& a) const;
  bool fault_here(const action& a, fault_kind k) const {
    return fault_at(setup.fault, k, setup.replica, a);
  }
  bool ready(const action& a);
  void send_reduce(const action& a, virtual_stage_state<T>& st);
  bool sharded() const { return setup.zero > 0 && plan.params.replicas > 1; }
  // The p2p reduce, on a replica but the last: it hands its gradient on at REDUCE without waiting
  // and takes its new versions from the last replica at STEP (runtime/schedule.hpp, reduce_mode).
  bool takes_versions() const {
    return plan.params.replicas > 1 && !runs_update(plan.params, setup.replica);
  }
  // The p2p reduce's last replica: it updates alone and sends each new version to the others.
  bool gives_versions() const {
    return plan.params.replicas > 1 && plan.params.reduce == reduce_mode::p2p &&
           runs_update(plan.params, setup.replica);
  }
  // The optimizer's new version from the reduced gradient (clipped first when asked).
  param_snapshot update(virtual_stage_state<T>& st);
  // ZeRO: makes the update, which holds this replica's tensors, and sends it to the reducer.
  void send_update(virtual_stage_state<T>& st);
  // What leaves the rank for rank `to`: a GPU tensor stays one when `to` is on the same GPU in
  // the same process (once this rank's stream has finished it), else it crosses to the host.
  tensor to_wire(tensor t, int to) const;
  // A weight version on the host (for the driver and checkpoints), and on this rank's device.
  param_snapshot host_version(const param_snapshot& p) const;
  param_snapshot here_version(const param_snapshot& p) const;
  param_snapshot charged_version(param_snapshot p) const;  // held against this rank's account
  void send_norms(int step);
  void run_forward(const action& a);
  void run_backward(const action& a);
  // The three parts of an F and of a B or I: before and after touch the rank's state, compute
  // only the job's tensors and the device.
  compute_job<T> begin_forward(const action& a);
  void compute_forward(compute_job<T>& job, const device_context& on);
  void fork_side(compute_job<T>& fj);
  void overlap_on_streams(compute_job<T>& fj, compute_job<T>& bj);
  void end_forward(compute_job<T>& job, double t0, double t1);
  compute_job<T> begin_backward(const action& a);
  void compute_backward(compute_job<T>& job);
  void end_backward(compute_job<T>& job, double t0, double t1);
  void prefetch_offloaded();
  const action* next_backward() const;
  // OVERLAP_F_B: the F at pc + 1 and the B or I at pc + 2, their computes at once on the rank's
  // threads (one after the other where it has one thread).
  void run_overlapped();
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
  void record_snapshot(int step);
  void restore(rank_state state);
};

}  // namespace pipeworks
