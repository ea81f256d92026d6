// Causal attention kernels, one thread per output element (scores, weighted values, the
// gradients of q, k and v) and a warp per row for the softmax and its backward: simple and
// deterministic (every sum runs in index order), the reference for faster kernels.
#include <cuda_runtime.h>

#include <cmath>

#include "tests/ops/cuda/attention_reference_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/warp_reduce.cuh"

namespace pipeworks::cuda {
namespace {

struct dims {
  int B, T, C, NH, hs;
  __host__ __device__ std::int64_t C3() const { return 3 * static_cast<std::int64_t>(C); }
};

// Offsets of head h's q (then k at +C, v at +2C) for batch b, row t.
__device__ std::int64_t qkv_at(const dims& d, std::int64_t b, int h, int t) {
  return (b * d.T + t) * d.C3() + static_cast<std::int64_t>(h) * d.hs;
}

// att[bh, t, j] = scale q_t . k_j (j <= t), entry by entry.
__global__ void scores_kernel(float* att, const float* qkv, dims d, float scale) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t TT = static_cast<std::int64_t>(d.T) * d.T;
  if (i >= static_cast<std::int64_t>(d.B) * d.NH * TT) return;
  const std::int64_t bh = i / TT;
  const int t = static_cast<int>((i % TT) / d.T), j = static_cast<int>(i % d.T);
  if (j > t) {
    att[i] = 0.f;
    return;
  }
  const std::int64_t b = bh / d.NH;
  const int h = static_cast<int>(bh % d.NH);
  const float* q = qkv + qkv_at(d, b, h, t);
  const float* k = qkv + qkv_at(d, b, h, j) + d.C;
  float s = 0.f;
  for (int x = 0; x < d.hs; ++x) s += q[x] * k[x];
  att[i] = s * scale;
}

// Softmax of each row's first t + 1 entries, in place; a warp per row.
__global__ void softmax_kernel(float* att, std::int64_t rows, int T) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (r >= rows) return;
  const int n = static_cast<int>(r % T) + 1, lane = threadIdx.x;
  float* a = att + r * T;
  warp_softmax(a, a, n, lane);
}

// out[b, t, h*hs + x] = sum_j<=t att[bh, t, j] v_j[x].
__global__ void values_kernel(float* out, const float* att, const float* qkv, dims d) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::int64_t>(d.B) * d.T * d.C) return;
  const std::int64_t b = i / (static_cast<std::int64_t>(d.T) * d.C);
  const int t = static_cast<int>((i / d.C) % d.T), c = static_cast<int>(i % d.C);
  const int h = c / d.hs, x = c % d.hs;
  const float* a = att + ((b * d.NH + h) * d.T + t) * d.T;
  float s = 0.f;
  for (int j = 0; j <= t; ++j) s += a[j] * qkv[qkv_at(d, b, h, j) + 2 * d.C + x];
  out[i] = s;
}

// da[bh, t, j] = dout_t . v_j (j <= t), else 0.
__global__ void dprobs_kernel(float* da, const float* dout, const float* qkv, dims d) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t TT = static_cast<std::int64_t>(d.T) * d.T;
  if (i >= static_cast<std::int64_t>(d.B) * d.NH * TT) return;
  const std::int64_t bh = i / TT, b = bh / d.NH;
  const int h = static_cast<int>(bh % d.NH);
  const int t = static_cast<int>((i % TT) / d.T), j = static_cast<int>(i % d.T);
  if (j > t) {
    da[i] = 0.f;
    return;
  }
  const float* dy = dout + (b * d.T + t) * d.C + static_cast<std::int64_t>(h) * d.hs;
  const float* v = qkv + qkv_at(d, b, h, j) + 2 * d.C;
  float s = 0.f;
  for (int x = 0; x < d.hs; ++x) s += dy[x] * v[x];
  da[i] = s;
}

// dp = att (da - att . da) over each row's first t + 1 entries, in place; a warp per row.
__global__ void softmax_backward_kernel(float* da, const float* att, std::int64_t rows, int T) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (r >= rows) return;
  const int n = static_cast<int>(r % T) + 1, lane = threadIdx.x;
  float* g = da + r * T;
  const float* a = att + r * T;
  float dot = 0.f;
  for (int j = lane; j < n; j += 32) dot += a[j] * g[j];
  dot = warp_sum(dot);
  for (int j = lane; j < n; j += 32) g[j] = a[j] * (g[j] - dot);
}

// dq_t += scale sum_j<=t dp[t, j] k_j; dk_t += scale sum_s>=t dp[s, t] q_s;
// dv_t += sum_s>=t att[s, t] dout_s. One thread per (b, t, c) of each of q, k, v.
__global__ void qkv_grad_kernel(float* dqkv, const float* dp, const float* att, const float* dout,
                                const float* qkv, dims d, float scale) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t per = static_cast<std::int64_t>(d.T) * d.C;
  if (i >= 3 * static_cast<std::int64_t>(d.B) * per) return;
  const int part = static_cast<int>(i / (static_cast<std::int64_t>(d.B) * per));  // 0 q, 1 k, 2 v
  const std::int64_t rest = i % (static_cast<std::int64_t>(d.B) * per);
  const std::int64_t b = rest / per;
  const int t = static_cast<int>((rest / d.C) % d.T), c = static_cast<int>(rest % d.C);
  const int h = c / d.hs, x = c % d.hs;
  const std::int64_t bh = b * d.NH + h, TT = static_cast<std::int64_t>(d.T) * d.T;
  const float* P = dp + bh * TT;
  const float* A = att + bh * TT;
  float s = 0.f;
  if (part == 0) {
    for (int j = 0; j <= t; ++j) s += P[static_cast<std::int64_t>(t) * d.T + j] * qkv[qkv_at(d, b, h, j) + d.C + x];
    s *= scale;
  } else if (part == 1) {
    for (int r = t; r < d.T; ++r) s += P[static_cast<std::int64_t>(r) * d.T + t] * qkv[qkv_at(d, b, h, r) + x];
    s *= scale;
  } else {
    for (int r = t; r < d.T; ++r)
      s += A[static_cast<std::int64_t>(r) * d.T + t] * dout[(b * d.T + r) * d.C + c];
  }
  dqkv[qkv_at(d, b, h, t) + static_cast<std::int64_t>(part) * d.C + x] += s;
}

unsigned blocks(std::int64_t n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int Tn, int C, int NH,
                       void* stream) {
  const dims d{B, Tn, C, NH, C / NH};
  const auto s = static_cast<cudaStream_t>(stream);
  const float scale = 1.f / std::sqrt(static_cast<float>(d.hs));
  const std::int64_t entries = static_cast<std::int64_t>(B) * NH * Tn * Tn;
  if (entries == 0) return;
  scores_kernel<<<blocks(entries, 256), 256, 0, s>>>(att, qkv, d, scale);
  PW_CUDA(cudaGetLastError());
  const std::int64_t rows = static_cast<std::int64_t>(B) * NH * Tn;
  softmax_kernel<<<blocks(rows, 8), dim3(32, 8), 0, s>>>(att, rows, Tn);
  PW_CUDA(cudaGetLastError());
  const std::int64_t outs = static_cast<std::int64_t>(B) * Tn * C;
  values_kernel<<<blocks(outs, 256), 256, 0, s>>>(out, att, qkv, d);
  PW_CUDA(cudaGetLastError());
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int Tn, int C, int NH, void* stream) {
  const dims d{B, Tn, C, NH, C / NH};
  const auto s = static_cast<cudaStream_t>(stream);
  const float scale = 1.f / std::sqrt(static_cast<float>(d.hs));
  const std::int64_t entries = static_cast<std::int64_t>(B) * NH * Tn * Tn;
  if (entries == 0) return;
  dprobs_kernel<<<blocks(entries, 256), 256, 0, s>>>(scratch, dout, qkv, d);
  PW_CUDA(cudaGetLastError());
  const std::int64_t rows = static_cast<std::int64_t>(B) * NH * Tn;
  softmax_backward_kernel<<<blocks(rows, 8), dim3(32, 8), 0, s>>>(scratch, att, rows, Tn);
  PW_CUDA(cudaGetLastError());
  const std::int64_t grads = 3 * static_cast<std::int64_t>(B) * Tn * C;
  qkv_grad_kernel<<<blocks(grads, 256), 256, 0, s>>>(dqkv, scratch, att, dout, qkv, d, scale);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
