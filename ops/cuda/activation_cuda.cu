// GELU and ReLU kernels, one thread per element, written once over the activation's formulas:
// GELU's are the CPU's (ops/layers/activation.cpp), x / (1 + e^(-2u)) forward and the
// overflow-free sech² form backward.
#include <cuda_runtime.h>

#include "ops/cuda/activation_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"

namespace pipeworks::cuda {
namespace {

struct gelu {
  static constexpr float s = 0.7978845608028654f;  // sqrt(2 / pi)
  static constexpr float k = 0.044715f;
  __device__ static float forward(float x) {
    return x / (1.f + expf(-2.f * s * (x + k * x * x * x)));
  }
  __device__ static float derivative(float x) {  // gelu'(x)
    const float u = s * (x + k * x * x * x);
    const float e = expf(-2.f * fabsf(u));
    const float r = 1.f / (1.f + e);
    const float tanh_u = copysignf((1.f - e) * r, u);
    const float sech2_u = 4.f * e * r * r;
    const float du = s * (1.f + 3.f * k * x * x);
    return 0.5f * (1.f + tanh_u) + 0.5f * x * sech2_u * du;
  }
  // dinp += dout · gelu'(x)
  __device__ static float backward(float dout, float x) { return dout * derivative(x); }
};

struct relu {
  __device__ static float forward(float x) { return x > 0.f ? x : 0.f; }
  // dinp += x > 0 ? dout : 0
  __device__ static float backward(float dout, float x) { return x > 0.f ? dout : 0.f; }
};

template <class Act>
__global__ void forward_kernel(float* out, const float* inp, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = Act::forward(inp[i]);
}

template <class Act>
__global__ void backward_kernel(float* dinp, const float* dout, const float* inp, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) dinp[i] += Act::backward(dout[i], inp[i]);
}

unsigned blocks(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

template <class Act>
void forward(float* out, const float* inp, std::int64_t n, void* stream) {
  if (n == 0) return;
  forward_kernel<Act><<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(out, inp, n);
  PW_CUDA(cudaGetLastError());
}

template <class Act>
void backward(float* dinp, const float* dout, const float* inp, std::int64_t n, void* stream) {
  if (n == 0) return;
  backward_kernel<Act><<<blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dinp, dout, inp, n);
  PW_CUDA(cudaGetLastError());
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::int64_t n, void* stream) {
  forward<gelu>(out, inp, n, stream);
}
void gelu_backward(float* dinp, const float* dout, const float* inp, std::int64_t n, void* stream) {
  backward<gelu>(dinp, dout, inp, n, stream);
}
void relu_forward(float* out, const float* inp, std::int64_t n, void* stream) {
  forward<relu>(out, inp, n, stream);
}
void relu_backward(float* dinp, const float* dout, const float* inp, std::int64_t n, void* stream) {
  backward<relu>(dinp, dout, inp, n, stream);
}

}  // namespace pipeworks::cuda
