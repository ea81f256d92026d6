// An analytic per-layer profile of a GPT model (embedding, transformer layers, head) for the
// planners: times from FLOP counts on a device of given sustained FLOP/s, bytes for mixed precision.
#pragma once
#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "partition/profile.hpp"

namespace pipeworks {

// A GPT-2-style decoder: learned token and position embeddings, `layers` pre-norm transformer
// layers (attention with `heads` heads, a 4h MLP), a final layer norm and a language-model head.
struct gpt_config {
  std::string name;
  int layers = 1;
  std::int64_t hidden = 1;   // h
  int heads = 1;             // a (h must be a multiple of a)
  std::int64_t seq = 1;      // s: tokens per sample
  std::int64_t vocab = 1;    // V
};

struct gpt_profile_options {
  std::int64_t microbatch = 1;    // b: samples the profile's figures are for
  double flops_per_s = 39e12;     // sustained per device (see gpt_profile for the default's source)
  // Activation recomputation: keep only each layer's input; the backward reruns the forward.
  bool recompute = false;
};

// Parameters of the model with the head tied to the token embedding (as GPT-2 counts them):
//   V·h + s·h                       embeddings
//   + L·(12h² + 13h)                per layer: QKV 3h²+3h, projection h²+h, MLP 8h²+5h, 2 LN 4h
//   + 2h                            final layer norm
std::int64_t gpt_parameters(const gpt_config& c);

// The profile: layer 0 "embed", layers 1..L the transformer layers named "layer0" .. "layer<L−1>"
// (profile index i + 1 is "layer<i>"), layer L+1 "head", at options.microbatch.
// With b = microbatch, s, h, a, V as above, F the sustained FLOP/s:
//   FLOPs   per transformer layer forward: 24·b·s·h² + 4·b·s²·h; the head's 2·b·s·h·V;
//           the embedding's 0 (a gather). Backward = 2 × forward (3 × for the
//           transformer layers with recompute).
//   fwd_ms  = FLOPs / F · 1000.
//   activation_bytes (sent to the next stage): 2·b·s·h (fp16); the head's 4 (the loss).
//   saved_bytes (kept from forward to backward), without recompute:
//           per layer b·s·h·(34 + 5·a·s/h) bytes (Korthikanti et al. 2022, "Reducing Activation
//           Recomputation in Large Transformer Models", §4: fp16 activations, 1-byte dropout
//           masks); the embedding b·s·h (its dropout mask); the head 4·b·s·V (fp32 logits for
//           the softmax cross-entropy) + 2·b·s·h (its input).
//           With recompute: every layer keeps only its fp16 input, 2·b·s·h (the head still 4·b·s·V).
//   param_bytes      = 2 × parameters (fp16 weights: one version);
//   optimizer_bytes  = 12 × parameters (fp32 master weights and Adam's two moments), so that the
//                      2BW planner's 3·param + optimizer is 18 bytes per parameter.
// The head holds its own copy of the V·h output embedding (tied to the embedding's in the model,
// but on another stage in a pipeline, as Megatron keeps it), so the profile's parameters are
// gpt_parameters(c) + V·h.
// An error when a size is not positive, h is not a multiple of a, or the FLOP rate is not.
result<model_profile> gpt_profile(const gpt_config& c, const gpt_profile_options& options = {});

}  // namespace pipeworks
