// The profiler: runs each block of a model alone on one device (this CPU, or a GPU) at one
// microbatch size and records
// its forward and backward time and its bytes (output, saved for backward, parameters,
// optimizer state). It only measures; the planners read what it writes.
#pragma once
#include <cstdint>

#include "ops/model/model.hpp"
#include "ops/optim/optimizer.hpp"
#include "base/result.hpp"
#include "ops/train/microbatches.hpp"
#include "partition/profile.hpp"
#include "runtime/recompute_mode.hpp"

namespace pipeworks {

// More timed runs than this per block is a typo: 2^31-1 looped for ever and grew memory.
inline constexpr int max_profile_repeats = 100000;

struct profiler_options {
  int repeats = 5;  // timed runs per block after one warm-up; the median counts (1..max)
  optimizer_kind optimizer = optimizer_kind::adamw;  // its state bytes: AdamW 2x, SGD 1x params
  // Where the blocks run: null is this CPU on the caller's threads; a GPU context times each
  // pass to the end of its work on the GPU (the GPU stage costs the planners then read).
  const device_context* device = nullptr;
  // The mode to measure in (the profile's recompute). selective: each block drops what
  // drop_recomputable says after its forward, so saved_bytes is the reduced stash and bwd_ms
  // includes making it again. full: saved_bytes is the whole stash (what a stage holds for one
  // microbatch during its backward) and bwd_ms times the forward run again plus the backward.
  recompute_mode recompute = recompute_mode::none;
};

// `sample` is one microbatch of the model's input (its batch dimension is the microbatch size).
// Each block runs on the output the blocks before it produced, so every shape is real.
template <class T>
result<model_profile> profile_model(const model<T>& m, const minibatch& sample,
                                    const profiler_options& options = {});

}  // namespace pipeworks
