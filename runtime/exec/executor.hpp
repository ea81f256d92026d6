// stage_executor<T>: one rank of a pipeline (a device of one replica, with its virtual stages),
// as a plain class. It walks its lowered program; an action runs once its input has arrived.
// F stashes the weight snapshot it used with its activations, B uses the stashed snapshot, STEP
// makes a new immutable snapshot, REDUCE goes through the reducer. Messages come in through
// deliver() and go out through the sink, so it runs under CAF or under a hand-driven test.
// Checkpoints: right after its own STEP N the rank records its state (rank_state), sends a
// marker to every peer, and keeps recording what a peer sent before that peer's marker; a rank
// built from a rank_state continues from there bit for bit.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/model/model.hpp"
#include "base/result.hpp"
#include "ops/train/stage_optimizer.hpp"
#include "ops/train/trainer_config.hpp"
#include "runtime/checkpoint/rank_state.hpp"
#include "ops/device/device_context.hpp"
#include "runtime/exec/fault.hpp"
#include "runtime/exec/messages.hpp"
#include "runtime/offload_mode.hpp"
#include "runtime/recompute_mode.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

struct executor_setup {
  std::shared_ptr<const schedule> plan;  // lowered and validated
  int replica = 0;
  int device = 0;
  std::vector<int> boundaries;  // virtual stage s runs blocks [boundaries[s], boundaries[s+1])
  train_config train;           // optimizer and lr schedule; microbatches = plan's m
  int credit_window = 0;        // messages in flight per link and direction; 0: unbounded
  // Clip by the global norm: before STEP t the rank sends each of its stages' per-tensor squared
  // gradient norms to the driver and waits for the sum over every stage (flush schedules).
  // Otherwise each stage clips its own gradient (train.clip_grad_norm).
  bool global_clip = false;
  std::int64_t checkpoint_every = 0;  // record a snapshot after every k-th step; 0: never
  std::int64_t weights_every = 0;     // attach the new weights to every k-th step_report; 0: never
  std::int64_t first_step = 0;        // the steps done before this run (a resumed run's position)
  int input_window = 2;         // microbatch inputs requested ahead of virtual stage 0's F
  std::function<double()> clock;  // seconds since the run started (trace and throttling)
  bool record_trace = true;
  fault_injection fault;
  // This rank's device speed in (0, 1]; 1 is one full core of this machine. A slower device is
  // throttled: after a compute action (F, B, I, W, STEP) that took t seconds the rank sleeps
  // (1/speed - 1)·t, so the action takes t/speed and leaves the core free meanwhile; the trace
  // shows the stretched duration. Without a clock a throttled rank reads std::chrono's steady one.
  //
  // What t is: when the rank runs its kernels on its own thread (it runs inside a oneTBB arena of
  // one thread, as with pipeline_options::threads_per_stage == 1, which --auto-partition uses),
  // t is the thread's CPU time over the action (CLOCK_THREAD_CPUTIME_ID), so time the OS gave to
  // other threads on a loaded machine does not inflate the sleep. Otherwise (kernels spread over
  // an arena's threads, whose CPU time this thread cannot see) t is wall time from `clock`.
  double speed = 1.0;
  // Stands for the CPU-time clock (seconds): when set, a throttled rank always measures t with it
  // (tests inject a fake); empty: as above.
  std::function<double()> cpu_clock;
  // How a throttled rank sleeps, in seconds (tests inject one that advances a fake clock; a run on
  // actors, its throttle_sleeps, which it cuts short when it stops or ends); empty:
  // std::this_thread::sleep_for.
  std::function<void(double)> sleep;
  // The oneTBB threads of the rank's device context (its kernels run inside that arena); 0: the
  // caller's own threads.
  int threads = 0;
  // The rank's device: the CPU, or a GPU (cuda:N), whose context holds the rank's stream,
  // allocator and cuBLAS handle (tf32: its GEMMs may use TF32 tensor cores). A GPU rank keeps its
  // weights, gradients, optimizer moments and stashes on the GPU; what it sends (activations,
  // gradients, the reducer's and the driver's copies) crosses to the host first.
  pipeworks::device where = pipeworks::device::cpu();
  bool tf32 = false, bf16 = false;
  // full: each F keeps only its input; its B (or I) runs the forward again first. selective: each
  // block's stash less what its backward makes again (block::drop_recomputable).
  recompute_mode recompute = recompute_mode::none;
  // ZeRO over the replicas (the plan's runtime.zero): 1, each replica keeps and updates the
  // optimizer moments of the tensors it owns (shard_owners) and its STEP ends once the reducer has
  // put every owner's tensors together; 2, also the reduced gradient is only its own tensors'
  // sums. 0 (or one replica): every replica updates every tensor.
  int zero = 0;
  // Offload (the plan's runtime.offload; GPU ranks only): optimizer, the moments in page-locked
  // host memory (stage_optimizer::offload_moments); activations, each held microbatch's stash in
  // page-locked host memory between its forward and its backward. The same bits either way (on
  // the CPU, where a plan refuses it, the stash is copied host to host: tests run it there).
  offload_spec offload;
  // The bytes the rank's tensors (and host optimizer moments) may hold; 0: no limit. On the CPU
  // its memory account (ops/memory_account.hpp) refuses an allocation over it, which stops the
  // run naming the rank; its peak is the rank's device_peak_bytes.
  std::int64_t memory_limit = 0;
  // Every rank's device and process (empty: all on the CPU in one process). A GPU rank hands an
  // activation or gradient to a GPU rank of the same process as a GPU tensor (the consumer copies
  // it device to device, by peer copy from another GPU); to any other rank through the host
  // (handoff_between).
  std::vector<pipeworks::device> rank_devices;
  std::vector<int> rank_processes;
  // The reducer sums on a GPU (gpu_reduce_device): this rank's gradients go to it as GPU tensors
  // handed over with their ready event, not as host copies.
  bool reduce_on_gpu = false;
};

// What one virtual stage of this rank went through.
struct stage_stats {
  int stage = 0;
  int peak_versions = 0;    // distinct weight versions alive (current, kept for later F, stashed)
  int peak_inflight = 0;    // microbatches whose F ran and whose last backward has not
  std::int64_t peak_activation_bytes = 0;  // stashed tensors at the peak
  int peak_buffered = 0;    // messages received and not yet consumed, the most at once
  // The same peaks for the whole rank (all its virtual stages together), as the simulator counts.
  int rank_peak_inflight = 0;
  std::int64_t rank_peak_activation_bytes = 0;
  int steps = 0;            // STEPs done
  // The peak of the bytes the rank held on its device, all its virtual stages together (weights,
  // gradients, moments, stashes, messages and scratch): a GPU rank's caching allocator's bytes in
  // use, a CPU rank's memory account (its host tensors and optimizer moments).
  std::int64_t device_peak_bytes = 0;
  // The optimizer's moments the stage holds at the end (under ZeRO: this replica's share).
  std::int64_t optimizer_bytes = 0;
};

// Folds another rank's figures for the same virtual stage into `into`: the larger of each peak.
inline void merge_max(stage_stats& into, const stage_stats& other) {
  into.peak_versions = std::max(into.peak_versions, other.peak_versions);
  into.peak_inflight = std::max(into.peak_inflight, other.peak_inflight);
  into.peak_activation_bytes = std::max(into.peak_activation_bytes, other.peak_activation_bytes);
  into.peak_buffered = std::max(into.peak_buffered, other.peak_buffered);
  into.steps = std::max(into.steps, other.steps);
  into.rank_peak_inflight = std::max(into.rank_peak_inflight, other.rank_peak_inflight);
  into.rank_peak_activation_bytes =
      std::max(into.rank_peak_activation_bytes, other.rank_peak_activation_bytes);
  into.device_peak_bytes = std::max(into.device_peak_bytes, other.device_peak_bytes);
  into.optimizer_bytes = std::max(into.optimizer_bytes, other.optimizer_bytes);
}

template <class T>
class stage_executor {
 public:
  using sink = std::function<void(outgoing)>;

  // initial[i] holds the weights of this rank's i-th virtual stage (in stage order).
  stage_executor(const model<T>& m, executor_setup setup, std::vector<param_set> initial,
                 sink send);
  // Continues from a checkpoint: the state this rank recorded at the cut of state.step. Throws
  // pipeworks_error when the state does not fit this rank's program and stages.
  stage_executor(const model<T>& m, executor_setup setup, rank_state state, sink send);
  ~stage_executor();
  stage_executor(const stage_executor&) = delete;
  stage_executor& operator=(const stage_executor&) = delete;

  // Asks the driver for the first inputs (ranks that run virtual stage 0); a restored rank also
  // reports again the losses the driver had not tallied at the cut.
  void start();
  // An activation, gradient, credit or reduce result for this rank.
  void deliver(message msg);
  // Runs actions in program order until one must wait for a message. True when the program is
  // done. An error names the stage, the replica, the action and the cause; the rank then stops.
  result<bool> run();

  bool finished() const;
  bool kill_requested() const;
  const device_context& context() const;
  // The action the rank is at and what it waits for, for people ("1RECV_F3: waiting for ...").
  std::string waiting_for() const;
  std::optional<action> current() const;
  int rank() const;
  std::vector<int> stages() const;  // the virtual stages this rank runs

  std::vector<stage_stats> stats() const;
  param_snapshot weights(int stage) const;  // its latest version, on the host
  int steps_done(int stage) const;          // its STEPs so far
  // Snapshots whose recording is complete (the cut and every peer's marker), oldest first.
  std::vector<rank_state> take_snapshots();
  // Timeline events recorded since the last call.
  std::vector<timeline_event> take_events();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace pipeworks
