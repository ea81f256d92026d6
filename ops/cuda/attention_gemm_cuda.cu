// Attention as GEMMs: for each sample b, cublasSgemmStridedBatched over its NH heads (a head's
// q, k and v are (T, hs) row-major slices of qkv with row stride 3C; heads are hs apart). Row-major
// (R, K) data is column-major (K, R), so each product is written for the transposes, as in
// linear_cuda.cu. The full T x T scores are computed; the softmax masks j > t to zero.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "ops/cuda/attention_gemm_cuda.hpp"
#include "ops/cuda/cublas_check.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/warp_reduce.cuh"

namespace pipeworks::cuda {
namespace {

// Row r = (bh, t) of att: the softmax of its first t + 1 entries (scaled scores), zero after.
__global__ void causal_softmax_kernel(float* att, std::int64_t rows, int T) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (r >= rows) return;
  const int n = static_cast<int>(r % T) + 1, lane = threadIdx.x;
  float* a = att + r * T;
  warp_softmax(a, a, n, lane);
  for (int j = n + lane; j < T; j += 32) a[j] = 0.f;
}

// dS = att (dP - att . dP) over each row's first t + 1 entries, zero after; in place in dP.
__global__ void causal_softmax_backward_kernel(float* dp, const float* att, std::int64_t rows,
                                               int T) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (r >= rows) return;
  const int n = static_cast<int>(r % T) + 1, lane = threadIdx.x;
  float* g = dp + r * T;
  const float* a = att + r * T;
  float dot = 0.f;
  for (int j = lane; j < n; j += 32) dot += a[j] * g[j];
  dot = warp_sum(dot);
  for (int j = lane; j < n; j += 32) g[j] = a[j] * (g[j] - dot);
  for (int j = n + lane; j < T; j += 32) g[j] = 0.f;
}

// C[i] = alpha op(A[i]) op(B[i]) + beta C[i] for the NH heads of one sample.
void batched(const blas_handle& blas, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
             int k, float alpha, const float* A, int lda, long long sa, const float* B, int ldb,
             long long sb, float beta, float* C, int ldc, long long sc, int heads) {
  PW_CUBLAS(cublasSgemmStridedBatched(handle_of(blas), ta, tb, m, n, k, &alpha, A, lda, sa, B, ldb,
                                      sb, &beta, C, ldc, sc, heads));
}

}  // namespace

void attention_forward(const blas_handle& blas, float* out, float* att, const float* qkv, int B,
                       int Tn, int C, int NH) {
  if (static_cast<std::int64_t>(B) * Tn == 0) return;
  const int hs = C / NH, ld = 3 * C;
  const long long TT = static_cast<long long>(Tn) * Tn;
  const float scale = 1.f / std::sqrt(static_cast<float>(hs));
  const auto N = CUBLAS_OP_N, Tr = CUBLAS_OP_T;
  for (int b = 0; b < B; ++b) {
    const float* q = qkv + static_cast<std::int64_t>(b) * Tn * ld;
    float* a = att + b * NH * TT;
    // att^T (j, t) = scale k_j . q_t: (Kc^T Qc) with Kc, Qc the (hs, T) column-major views.
    batched(blas, Tr, N, Tn, Tn, hs, scale, q + C, ld, hs, q, ld, hs, 0.f, a, Tn, TT, NH);
  }
  const std::int64_t rows = static_cast<std::int64_t>(B) * NH * Tn;
  causal_softmax_kernel<<<static_cast<unsigned>((rows + 7) / 8), dim3(32, 8), 0,
                          static_cast<cudaStream_t>(blas.stream())>>>(att, rows, Tn);
  PW_CUDA(cudaGetLastError());
  for (int b = 0; b < B; ++b) {
    const float* q = qkv + static_cast<std::int64_t>(b) * Tn * ld;
    // y^T (x, t) = sum_j v_j[x] att[t, j]: Vc (hs, T) times att^T (T, T), into out's head slice.
    batched(blas, N, N, hs, Tn, Tn, 1.f, q + 2 * C, ld, hs, att + b * NH * TT, Tn, TT, 0.f,
            out + static_cast<std::int64_t>(b) * Tn * C, C, hs, NH);
  }
}

void attention_backward(const blas_handle& blas, float* dqkv, float* scratch, const float* dout,
                        const float* qkv, const float* att, int B, int Tn, int C, int NH) {
  if (static_cast<std::int64_t>(B) * Tn == 0) return;
  const int hs = C / NH, ld = 3 * C;
  const long long TT = static_cast<long long>(Tn) * Tn;
  const float scale = 1.f / std::sqrt(static_cast<float>(hs));
  const auto N = CUBLAS_OP_N, Tr = CUBLAS_OP_T;
  for (int b = 0; b < B; ++b) {
    const float* q = qkv + static_cast<std::int64_t>(b) * Tn * ld;
    const float* dy = dout + static_cast<std::int64_t>(b) * Tn * C;
    const float* a = att + b * NH * TT;
    float* dq = dqkv + static_cast<std::int64_t>(b) * Tn * ld;
    // dP^T (j, t) = v_j . dy_t.
    batched(blas, Tr, N, Tn, Tn, hs, 1.f, q + 2 * C, ld, hs, dy, C, hs, 0.f, scratch + b * NH * TT,
            Tn, TT, NH);
    // dv^T (x, j) += sum_t dy_t[x] att[t, j]: dYc (hs, T) times att (T, T) read transposed.
    batched(blas, N, Tr, hs, Tn, Tn, 1.f, dy, C, hs, a, Tn, TT, 1.f, dq + 2 * C, ld, hs, NH);
  }
  const std::int64_t rows = static_cast<std::int64_t>(B) * NH * Tn;
  causal_softmax_backward_kernel<<<static_cast<unsigned>((rows + 7) / 8), dim3(32, 8), 0,
                                   static_cast<cudaStream_t>(blas.stream())>>>(scratch, att, rows,
                                                                               Tn);
  PW_CUDA(cudaGetLastError());
  for (int b = 0; b < B; ++b) {
    const float* q = qkv + static_cast<std::int64_t>(b) * Tn * ld;
    const float* ds = scratch + b * NH * TT;
    float* dq = dqkv + static_cast<std::int64_t>(b) * Tn * ld;
    // dq^T (x, t) += scale sum_j k_j[x] dS[t, j]: Kc (hs, T) times dS^T (T, T).
    batched(blas, N, N, hs, Tn, Tn, scale, q + C, ld, hs, ds, Tn, TT, 1.f, dq, ld, hs, NH);
    // dk^T (x, j) += scale sum_t q_t[x] dS[t, j]: Qc (hs, T) times dS (T, T) read transposed.
    batched(blas, N, Tr, hs, Tn, Tn, scale, q, ld, hs, ds, Tn, TT, 1.f, dq + C, ld, hs, NH);
  }
}

}  // namespace pipeworks::cuda
