// The GPT benchmarks' minibatch: random byte ids as inputs and targets, deterministic in seed.
#pragma once
#include <cstdint>

#include "ops/data/rng.hpp"
#include "ops/train/microbatches.hpp"

namespace pipeworks::bench {

inline minibatch random_tokens(int batch, int context, std::uint64_t seed) {
  minibatch mb{tensor({batch, context}, dtype::i32), tensor({batch, context}, dtype::i32)};
  rng gen(seed);
  for (auto& x : mb.inputs.span<std::int32_t>()) x = static_cast<std::int32_t>(gen.uniform(256));
  for (auto& x : mb.targets.span<std::int32_t>()) x = static_cast<std::int32_t>(gen.uniform(256));
  return mb;
}

}  // namespace pipeworks::bench
