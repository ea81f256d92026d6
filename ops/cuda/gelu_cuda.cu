// GELU kernels: the CPU's formulas (ops/layers/activation.cpp), x / (1 + e^(-2u)) forward and
// the overflow-free sech² form backward, one thread per element.
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/gelu_cuda.hpp"

namespace pipeworks::cuda {
namespace {

constexpr float gelu_s = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float gelu_k = 0.044715f;

__global__ void forward_kernel(float* out, const float* inp, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  out[i] = x / (1.f + expf(-2.f * gelu_s * (x + gelu_k * x * x * x)));
}

__global__ void backward_kernel(float* dinp, const float* dout, const float* inp, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float u = gelu_s * (x + gelu_k * x * x * x);
  const float e = expf(-2.f * fabsf(u));
  const float r = 1.f / (1.f + e);
  const float tanh_u = copysignf((1.f - e) * r, u);
  const float sech2_u = 4.f * e * r * r;
  const float du = gelu_s * (1.f + 3.f * gelu_k * x * x);
  dinp[i] += dout[i] * (0.5f * (1.f + tanh_u) + 0.5f * x * sech2_u * du);
}

unsigned blocks(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

void gelu_forward(float* out, const float* inp, std::int64_t n, void* stream) {
  if (n == 0) return;
  forward_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(out, inp, n);
  PW_CUDA(cudaGetLastError());
}

void gelu_backward(float* dinp, const float* dout, const float* inp, std::int64_t n, void* stream) {
  if (n == 0) return;
  backward_kernel<<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dinp, dout, inp, n);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
