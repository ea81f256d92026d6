// Sums, maxima and softmax across a warp's 32 lanes by shuffles (every lane gets the result):
// the row reductions of the layernorm, cross-entropy and attention kernels.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

namespace pipeworks::cuda {

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// A warp's softmax of in[0, n) into out (which may be in), each lane taking every 32nd entry;
// returns the row's logsumexp to every lane.
__device__ inline float warp_softmax(float* out, const float* in, int n, int lane) {
  float m = -INFINITY;
  for (int j = lane; j < n; j += 32) m = fmaxf(m, in[j]);
  m = warp_max(m);
  float s = 0.f;
  for (int j = lane; j < n; j += 32) s += expf(in[j] - m);
  s = warp_sum(s);
  for (int j = lane; j < n; j += 32) out[j] = expf(in[j] - m) / s;
  return m + logf(s);
}

}  // namespace pipeworks::cuda
