// The SGD kernel: one thread per element, the coefficients rounded to float once, as the CPU's.
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/sgd_cuda.hpp"

namespace pipeworks::cuda {
namespace {

__global__ void sgd_kernel(float* out, const float* wp, const float* gp, float* vp, std::size_t n,
                           float lr, float mu, float wd) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float d = gp[i] + wd * wp[i];
  const float vel = mu * vp[i] + d;
  vp[i] = vel;
  out[i] = wp[i] - lr * vel;
}

}  // namespace

void sgd_update(float* w_out, const float* w, const float* g, float* velocity, std::size_t n,
                double lr, double momentum, double weight_decay, void* stream) {
  if (n == 0) return;
  sgd_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      w_out, w, g, velocity, n, static_cast<float>(lr), static_cast<float>(momentum),
      static_cast<float>(weight_decay));
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
