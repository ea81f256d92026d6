// ReLU kernels, one thread per element.
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/relu_cuda.hpp"

namespace pipeworks::cuda {
namespace {

__global__ void forward_kernel(float* out, const float* inp, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = inp[i] > 0.f ? inp[i] : 0.f;
}

__global__ void backward_kernel(float* dinp, const float* dout, const float* inp, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) dinp[i] += inp[i] > 0.f ? dout[i] : 0.f;
}

unsigned blocks(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void relu_forward(float* out, const float* inp, std::int64_t n, void* stream) {
  if (n == 0) return;
  forward_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(out, inp, n);
  PW_CUDA(cudaGetLastError());
}

void relu_backward(float* dinp, const float* dout, const float* inp, std::int64_t n, void* stream) {
  if (n == 0) return;
  backward_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dinp, dout, inp, n);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
