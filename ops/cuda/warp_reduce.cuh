// Sums and maxima across a warp's 32 lanes by shuffles (every lane gets the result): the row
// reductions of the layernorm, softmax, cross-entropy and attention kernels.
#pragma once
#include <cuda_runtime.h>

namespace pipeworks::cuda {

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace pipeworks::cuda
