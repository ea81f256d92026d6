// The memory each virtual stage of a run will hold, predicted with the runtime's own accounting
// (runtime/exec: what train --json reports as measured), from the lowered programs and what one
// microbatch and one weight version of each stage occupy.
#pragma once
#include <cstdint>
#include <vector>

#include "base/result.hpp"
#include "ops/model/model.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/train/microbatches.hpp"
#include "ops/optim/optimizer.hpp"
#include "runtime/offload_mode.hpp"
#include "runtime/recompute_mode.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// Bytes of one virtual stage, as the executor counts them.
struct stage_bytes {
  std::int64_t weights = 0;      // one weight version (the gradient buffer is as large)
  std::int64_t moments = 0;      // the optimizer's state (AdamW two moments, SGD one): under
                                 // ZeRO the largest replica's share
  std::int64_t stash = 0;        // what an F holds until its B or I, in the run's recompute mode
  std::int64_t whole_stash = 0;  // recompute full: the stash a B or I makes again and holds
  std::int64_t deferred = 0;     // what an I leaves for its W
  // The most one microbatch's forward and backward hold at once beyond its stash: the output and
  // the input gradient, and the kernels' scratch (a memory account's peak, ops/memory_account).
  std::int64_t workspace = 0;
  std::int64_t output = 0;  // the F's output: one activation message to the next stage
  std::int64_t input = 0;   // the F's input: one gradient message back to the previous stage
};

// A virtual stage's predicted peaks (the largest over its replicas).
struct stage_memory {
  int stage = 0;
  int peak_inflight = 0;          // microbatches between F and their last backward
  int peak_versions = 0;          // weight versions alive at once
  std::int64_t weights = 0;       // peak_versions × one version
  std::int64_t gradients = 0;     // the gradient buffer
  std::int64_t moments = 0;       // the optimizer's state
  std::int64_t activations = 0;   // stashed bytes at their peak (peak_activation_bytes)
  std::int64_t workspace = 0;     // an F's or B's transient bytes (stage_bytes::workspace)
  // Messages the stage made that may wait at their receivers (credit window × message bytes,
  // each direction): an in-process receiver reads the sender's own buffer.
  std::int64_t messages = 0;
  // Of the bytes above, those that a GPU rank's offload keeps in page-locked host memory instead
  // of the device's (offload_to_host); 0 without offload, and on CPU ranks (their memory is all
  // host memory, counted as the device's).
  std::int64_t host = 0;
  // Each part at its own peak: an upper bound on the stage's bytes at any one moment, wherever
  // they live.
  std::int64_t total() const {
    return weights + gradients + moments + activations + workspace + messages;
  }
  // What of total() the device holds (GPU memory on a GPU rank).
  std::int64_t device_total() const { return total() - host; }
};

// Walks each rank's program as its executor runs it (in program order, whatever the messages'
// timing), counting what is held after every action. `bytes`: one entry per virtual stage.
// credit_window: the messages a link may hold (0: as many as the step's microbatches).
std::vector<stage_memory> predict_memory(const schedule& programs, const std::vector<stage_bytes>& bytes,
                                         recompute_mode mode, int credit_window = 0);

// Activation offload keeps this many microbatches' stashes on the device: the latest forward's,
// on its way out, and the next backward's, brought back ahead of it (PipeOffload's two buffers).
constexpr int offload_resident_microbatches = 2;

// Sets m.host to what offload `o` moves from a GPU rank's virtual stage (predicted as m, one
// microbatch and one version as b) to host memory: optimizer, the moments (under --bf16 too:
// the weights stay fp32 on the device, there is no separate master copy); activations, the
// stash at its peak beyond offload_resident_microbatches microbatches' (each its stash, the
// whole stash a full recomputation makes again, or what an I leaves for its W, whichever is
// largest). The other figures stay the stage's whole bytes. Only for stages on GPU ranks.
void offload_to_host(stage_memory& m, const stage_bytes& b, offload_spec o, recompute_mode mode);

// One microbatch of `samples` samples the model accepts (token ids or images, zeros) with targets.
minibatch example_microbatch(const model_spec& spec, std::int64_t samples);

// What each virtual stage [b[s], b[s+1]) of the model occupies at microbatches like `sample` (one
// microbatch, e.g. example_microbatch's): the forward and the input-gradient half run once on the
// CPU, and their tensors are counted as the executor counts them in that recompute mode.
// shards: the replicas a stage's optimizer moments are sharded over (ZeRO: shard_owners gives
// each whole tensors), 1 for none.
template <class T>
result<std::vector<stage_bytes>> measure_stage_bytes(const model<T>& m, const minibatch& sample,
                                                     const std::vector<int>& boundaries,
                                                     recompute_mode mode, optimizer_kind optimizer,
                                                     int shards = 1);

}  // namespace pipeworks
