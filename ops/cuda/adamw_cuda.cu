// The AdamW kernel: one thread per element of the flat arena, with the CPU's coefficients
// (ops/optim/adamw_coeffs.hpp).
#include <cuda_runtime.h>

#include <cmath>

#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/optim/adamw_coeffs.hpp"

namespace pipeworks::cuda {
namespace {

__global__ void adamw_kernel(float* out, const float* wp, const float* gp, float* mp, float* vp,
                             std::size_t n, adamw_coeffs<float> c) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gp[i];
  const float m = c.b1 * mp[i] + c.one_b1 * g;
  const float v = c.b2 * vp[i] + c.one_b2 * g * g;
  const float denom = __fdiv_rn(__fsqrt_rn(v), c.bc2_sqrt) + c.eps;
  mp[i] = m;
  vp[i] = v;
  out[i] = wp[i] * c.decay - c.step_size * __fdiv_rn(m, denom);
}

}  // namespace

void adamw_update(float* w_out, const float* w, const float* g, float* m, float* v, std::size_t n,
                  std::int64_t t, double lr, double beta1, double beta2, double eps,
                  double weight_decay, void* stream) {
  if (n == 0) return;
  const adamw_coeffs<float> c = adamw_coefficients<float>(t, lr, beta1, beta2, eps, weight_decay);
  constexpr unsigned threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  adamw_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(w_out, w, g, m, v, n, c);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
