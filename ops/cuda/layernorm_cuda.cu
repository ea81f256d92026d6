// Layer normalisation kernels: a warp per row for the forward and the input gradient (sums by
// warp shuffles), a thread per channel for the weight and bias gradients (a fixed order over
// the rows, so results never depend on scheduling).
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/elementwise_cuda.hpp"
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

// prod[n, c] = xhat[n, c] dy[n, c]: what dweight sums over the rows.
__global__ void xhat_dy_kernel(float* prod, const float* dout, const float* inp, const float* mean,
                               const float* rstd, std::int64_t N, int C) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * C) return;
  const std::int64_t n = i / C;
  prod[i] = (inp[i] - mean[n]) * rstd[n] * dout[i];
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
  // dweight and dbias: column sums (deterministic), dweight's over xhat * dy.
  float* prod = nullptr;
  PW_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&prod), static_cast<std::size_t>(N) * C * 4, s));
  xhat_dy_kernel<<<static_cast<unsigned>((N * C + 255) / 256), 256, 0, s>>>(prod, dout, inp, mean,
                                                                           rstd, N, C);
  PW_CUDA(cudaGetLastError());
  column_sums_into(dweight, prod, N, C, s);
  column_sums_into(dbias, dout, N, C, s);
  PW_CUDA(cudaFreeAsync(prod, s));
}

}  // namespace pipeworks::cuda
