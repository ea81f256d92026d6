// The messages a stage executor receives and sends: activations, gradients, credits, inputs,
// reductions, norms, reports and checkpoint markers. Plain values that copy cheaply: tensors travel
// as tensor_payloads (a shared read-only buffer plus a header), so in-process transports hand
// them over without copying and serialisers write their bytes as they are.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ops/model/block.hpp"
#include "ops/model/param_set.hpp"
#include "ops/tensor_payload.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

// SEND_F → RECV_F, and the driver's input for virtual stage 0. `stage` is the consumer.
struct activation_msg {
  int replica = 0;
  int stage = 0;
  int microbatch = 0;    // the replica's own id: step * m + k
  int version = -1;      // the version virtual stage 0 used for it (vertical sync reads it)
  tensor_payload data;
  microbatch_ctx ctx;
};

// SEND_B → RECV_B: the gradient of the consumer stage's output.
struct gradient_msg {
  int replica = 0;
  int stage = 0;         // the consumer: the stage whose B or I needs it
  int microbatch = 0;
  tensor_payload data;
};

// Receiver → sender: one slot of the receiver's buffer for `stage`'s inputs has been freed.
struct credit_msg {
  int replica = 0;
  int stage = 0;         // the consumer stage whose buffer freed a slot
  bool forward = true;   // activations (true) or gradients (false)
};

// Rank → driver: please send this microbatch's input (credit-based, a bounded window ahead).
struct input_request {
  int replica = 0;
  int microbatch = 0;
};

// What goes through a stage's reducer: a replica's gradient, answered with the replicas' sum; or,
// under ZeRO (the plan's runtime.zero), a replica's new version in which only the tensors it owns
// are updated, answered with the version every owner's tensors make together.
enum class reduce_kind : std::uint8_t { gradient, weights };

// Rank → reducer of `stage`: this replica's gradient (or new version) for `step`; the reducer
// answers every replica.
struct reduce_request {
  int stage = 0;
  int replica = 0;
  int step = 0;
  std::shared_ptr<const param_set> grads;
  reduce_kind kind = reduce_kind::gradient;
};
struct reduce_result {
  int stage = 0;
  int step = 0;
  std::shared_ptr<const param_set> sum;  // shared by the replicas; each copies it before clipping
  reduce_kind kind = reduce_kind::gradient;
  // The squared norm of each tensor of the sum (tensor_squares), when the sum holds only the
  // receiver's own tensors (ZeRO stage 2 across processes); empty: the receiver computes them.
  std::vector<double> squares;
};

// Rank → driver: a loss of the last virtual stage's forward.
struct loss_report {
  int replica = 0;
  int microbatch = 0;
  double loss = 0;
};

// Rank → driver, with global clipping: the squared norms of `stage`'s gradient for `step`, one
// per tensor (each summed over its elements in order). The driver sums every stage's, in tensor
// order, and answers each rank of the replica with norm_result; the single-device trainer sums
// the same per-tensor sums in the same order, so the clip factor is bit-identical.
struct norm_request {
  int replica = 0;
  int stage = 0;
  int step = 0;
  std::vector<double> tensor_sq;
};
struct norm_result {
  int replica = 0;
  int step = 0;
  double sq = 0;  // the squared global norm
};

// Rank → driver: virtual stage `stage` of `replica` made version step + 1.
struct step_report {
  int stage = 0;
  int replica = 0;
  int step = 0;            // 0-based: this was the (step + 1)-th update
  double grad_sq = 0;      // sum of squares of the applied gradient, before clipping
  double lr = 0;
  param_snapshot weights;  // the new version, only when the run publishes this step's weights
};

// Rank → rank after it recorded its state for the checkpoint of `step` (Chandy–Lamport): what the
// receiver gets from `from_rank` before this marker was sent before the sender's cut.
struct marker_msg {
  int from_rank = 0;
  int step = 0;  // steps done at the cut
};

// Rank → tracer: timeline events, in batches.
struct trace_batch {
  std::vector<timeline_event> events;
};

using message = std::variant<activation_msg, gradient_msg, credit_msg, input_request,
                             reduce_request, reduce_result, loss_report, norm_request,
                             norm_result, step_report, marker_msg, trace_batch>;

// Where an outgoing message goes.
enum class endpoint_kind : std::uint8_t { rank, reducer, driver, tracer };
struct endpoint {
  endpoint_kind kind = endpoint_kind::rank;
  int index = 0;  // rank (replica * p + device), or the virtual stage of a reducer
};

struct outgoing {
  endpoint to;
  message msg;
};

}  // namespace pipeworks
