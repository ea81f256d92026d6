// Layer normalisation kernels: a warp per row for the forward and the input gradient (sums by
// warp shuffles), a thread per channel for the weight and bias gradients (a fixed order over
// the rows, so results never depend on scheduling).
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/warp_reduce.cuh"
#include "ops/cuda/layernorm_cuda.hpp"

namespace pipeworks::cuda {
namespace {

constexpr float eps = 1e-5f;  // ops/layers/layernorm.hpp's layernorm_eps

__global__ void forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                               const float* w, const float* b, std::int64_t N, int C) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const float* x = inp + row * C;
  float s = 0.f;
  for (int i = lane; i < C; i += 32) s += x[i];
  const float m = warp_sum(s) / C;
  float v = 0.f;
  for (int i = lane; i < C; i += 32) v += (x[i] - m) * (x[i] - m);
  const float r = rsqrtf(warp_sum(v) / C + eps);
  float* o = out + row * C;
  for (int i = lane; i < C; i += 32) o[i] = (x[i] - m) * r * w[i] + b[i];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

__global__ void input_grad_kernel(float* dinp, const float* dout, const float* inp, const float* w,
                                  const float* mean, const float* rstd, std::int64_t N, int C) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const float* x = inp + row * C;
  const float* dy = dout + row * C;
  const float m = mean[row], r = rstd[row];
  float gs = 0.f, gx = 0.f;
  for (int i = lane; i < C; i += 32) {
    const float g = w[i] * dy[i];
    gs += g;
    gx += g * (x[i] - m) * r;
  }
  const float g_mean = warp_sum(gs) / C, gx_mean = warp_sum(gx) / C;
  float* dx = dinp + row * C;
  for (int i = lane; i < C; i += 32) {
    const float xhat = (x[i] - m) * r;
    dx[i] += r * (w[i] * dy[i] - g_mean - xhat * gx_mean);
  }
}

__global__ void param_grad_kernel(float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* mean, const float* rstd,
                                  std::int64_t N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.f, db = 0.f;
  for (std::int64_t n = 0; n < N; ++n) {
    const float dy = dout[n * C + c];
    dw += (inp[n * C + c] - mean[n]) * rstd[n] * dy;
    db += dy;
  }
  dweight[c] += dw;
  dbias[c] += db;
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, int C, void* stream) {
  if (N == 0) return;
  const dim3 block(32, 8);
  const auto grid = static_cast<unsigned>((N + 7) / 8);
  forward_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(out, mean, rstd, inp,
                                                                        weight, bias, N, C);
  PW_CUDA(cudaGetLastError());
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::int64_t N, int C, void* stream) {
  if (N == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 block(32, 8);
  input_grad_kernel<<<static_cast<unsigned>((N + 7) / 8), block, 0, s>>>(dinp, dout, inp, weight,
                                                                         mean, rstd, N, C);
  PW_CUDA(cudaGetLastError());
  param_grad_kernel<<<static_cast<unsigned>((C + 127) / 128), 128, 0, s>>>(dweight, dbias, dout,
                                                                           inp, mean, rstd, N, C);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
