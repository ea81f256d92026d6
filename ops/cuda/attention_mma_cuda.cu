// Register-resident flash attention: a block of 4 warps takes 64 rows of one head, each warp 16
// rows; S = Q K^T, the softmax, P V (and backward's dP, dS, dK, dV, dQ) stay in mma.sync's
// accumulator fragments. A product's accumulator (columns 2t, 2t + 1 of each 8-wide tile) feeds
// the next product as its A operand by permuting the shared dimension: logical k = t and t + 4
// read keys 2t and 2t + 1, and the B operand's rows are read in the same order. Scores are kept in
// base 2 (Q or K prescaled by scale · log2 e) so that exp2 does the softmax.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/cuda/attention_mma_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/tile_launch.cuh"

namespace pipeworks::cuda {
namespace {

constexpr int TILE = 64;      // rows of a block, keys (or queries) of a tile
constexpr int THREADS = 128;  // 4 warps of 16 rows
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

__device__ inline std::uint32_t tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// c (16 x 8) += a (16 x 8) b (8 x 8): a0 (row g, k t), a1 (g + 8, t), a2 (g, t + 4),
// a3 (g + 8, t + 4); b0 (k t, col g), b1 (t + 4, g); c: (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1); g = lane / 4, t = lane % 4.
__device__ inline void mma8(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                            std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ inline float row_max(float x) {  // over the 4 lanes of a row group
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float row_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Rows [r0, r0 + TILE) of a head's (T, D) slice of g (row stride ld), times f, into s (row stride
// D + 4, which keeps every fragment read below free of bank conflicts) as TF32; zero past T.
template <int D>
__device__ inline void stage(std::uint32_t* s, const float* g, int r0, int T, int ld, float f) {
  constexpr int V = D / 4;
  for (int i = threadIdx.x; i < TILE * V; i += THREADS) {
    const int r = i / V, c = (i % V) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < T) v = *reinterpret_cast<const float4*>(g + static_cast<std::size_t>(r0 + r) * ld + c);
    *reinterpret_cast<uint4*>(s + r * (D + 4) + c) =
        make_uint4(tf32(v.x * f), tf32(v.y * f), tf32(v.z * f), tf32(v.w * f));
  }
}

// A fragments of rows r and r + 8 of a (T, D) slice, times f, straight from global memory.
template <int D>
__device__ inline void row_fragments(std::uint32_t (&a)[D / 8][4], const float* g, int r, int T,
                                     int ld, float f) {
  const int t = threadIdx.x % 4;
  #pragma unroll
  for (int k = 0; k < D / 8; ++k) {
    const int c = k * 8 + t;
    const float* x0 = g + static_cast<std::size_t>(r) * ld + c;
    const float* x1 = x0 + static_cast<std::size_t>(8) * ld;
    a[k][0] = tf32(r < T ? x0[0] * f : 0.f);
    a[k][1] = tf32(r + 8 < T ? x1[0] * f : 0.f);
    a[k][2] = tf32(r < T ? x0[4] * f : 0.f);
    a[k][3] = tf32(r + 8 < T ? x1[4] * f : 0.f);
  }
}

// acc[n] (16 x 8 keys of tile n) += A (16 x D) B^T, B's rows n·8.. of s (stride D + 4).
template <int D>
__device__ inline void times_rows(float (&acc)[TILE / 8][4], const std::uint32_t (&a)[D / 8][4],
                                  const std::uint32_t* s) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  #pragma unroll
  for (int k = 0; k < D / 8; ++k)
    #pragma unroll
    for (int n = 0; n < TILE / 8; ++n) {
      const std::uint32_t* b = s + (n * 8 + g) * (D + 4) + k * 8 + t;
      mma8(acc[n], a[k][0], a[k][1], a[k][2], a[k][3], b[0], b[4]);
    }
}

// acc (16 x D) += P (16 x 64, accumulator layout) B, B (64, D) rows of s: the permuted product.
template <int D>
__device__ inline void times_tile(float (&acc)[D / 8][4], const float (&p)[TILE / 8][4],
                                  const std::uint32_t* s) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  #pragma unroll
  for (int k = 0; k < TILE / 8; ++k) {
    const std::uint32_t a0 = tf32(p[k][0]), a1 = tf32(p[k][2]), a2 = tf32(p[k][1]),
                        a3 = tf32(p[k][3]);
    const std::uint32_t* b = s + (k * 8 + 2 * t) * (D + 4) + g;
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) mma8(acc[n], a0, a1, a2, a3, b[n * 8], b[D + 4 + n * 8]);
  }
}

// Query tile blockIdx.x (the longest first) of head blockIdx.y = b * NH + h.
template <int D>
__global__ void __launch_bounds__(THREADS)
    mma_forward_kernel(float* out, float* lse, const float* qkv, int T, int C, int NH, float scale) {
  extern __shared__ __align__(16) std::uint32_t sm[];
  std::uint32_t* sK = sm;
  std::uint32_t* sV = sK + TILE * (D + 4);
  const int qt = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const int ld = 3 * C, q0 = qt * TILE, r0 = q0 + (threadIdx.x / 32) * 16 + g, r1 = r0 + 8;
  const float* base = qkv + static_cast<std::size_t>(b) * T * ld + h * D;
  std::uint32_t qa[D / 8][4];
  row_fragments<D>(qa, base, r0, T, ld, scale * LOG2E);
  float o[D / 8][4] = {};
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * TILE;
    __syncthreads();
    stage<D>(sK, base + C, k0, T, ld, 1.f);
    stage<D>(sV, base + 2 * C, k0, T, ld, 1.f);
    __syncthreads();
    float s[TILE / 8][4] = {};
    times_rows<D>(s, qa, sK);
    // Keys after the query are masked; every row keeps key k0 <= its query, so its max is finite.
    float x0 = -INFINITY, x1 = -INFINITY;
    #pragma unroll
    for (int n = 0; n < TILE / 8; ++n)
      #pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = k0 + n * 8 + 2 * t + e;
        if (key > r0) s[n][e] = -INFINITY;
        if (key > r1) s[n][2 + e] = -INFINITY;
        x0 = fmaxf(x0, s[n][e]);
        x1 = fmaxf(x1, s[n][2 + e]);
      }
    const float n0 = fmaxf(m0, row_max(x0)), n1 = fmaxf(m1, row_max(x1));
    const float a0 = exp2f(m0 - n0), a1 = exp2f(m1 - n1);
    m0 = n0;
    m1 = n1;
    float sum0 = 0.f, sum1 = 0.f;
    #pragma unroll
    for (int n = 0; n < TILE / 8; ++n)
      #pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[n][e] = exp2f(s[n][e] - n0);
        s[n][2 + e] = exp2f(s[n][2 + e] - n1);
        sum0 += s[n][e];
        sum1 += s[n][2 + e];
      }
    l0 = l0 * a0 + sum0;  // this lane's columns; the row's 4 lanes are summed at the end
    l1 = l1 * a1 + sum1;
    #pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= a0;
      o[n][1] *= a0;
      o[n][2] *= a1;
      o[n][3] *= a1;
    }
    times_tile<D>(o, s, sV);
  }
  l0 = row_sum(l0);
  l1 = row_sum(l1);
  #pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int c = h * D + n * 8 + 2 * t;
    if (r0 < T)
      *reinterpret_cast<float2*>(out + (static_cast<std::size_t>(b) * T + r0) * C + c) =
          make_float2(o[n][0] / l0, o[n][1] / l0);
    if (r1 < T)
      *reinterpret_cast<float2*>(out + (static_cast<std::size_t>(b) * T + r1) * C + c) =
          make_float2(o[n][2] / l1, o[n][3] / l1);
  }
  if (t == 0) {
    if (r0 < T) lse[static_cast<std::size_t>(bh) * T + r0] = (m0 + log2f(l0)) * LN2;
    if (r1 < T) lse[static_cast<std::size_t>(bh) * T + r1] = (m1 + log2f(l1)) * LN2;
  }
}

// dK and dV of key tile blockIdx.x of head blockIdx.y, over the query tiles from the diagonal on.
// Each warp holds 16 keys: S^T, dP^T, dS^T (keys x queries) and dK, dV in its fragments.
template <int D>
__global__ void __launch_bounds__(THREADS)
    mma_backward_kv_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                           const float* delta, int T, int C, int NH, float scale) {
  constexpr int LD = D + 4;
  extern __shared__ __align__(16) std::uint32_t sm[];
  std::uint32_t* sK = sm;  // times scale · log2 e
  std::uint32_t* sV = sK + TILE * LD;
  std::uint32_t* sQ = sV + TILE * LD;
  std::uint32_t* sdO = sQ + TILE * LD;
  float* sL = reinterpret_cast<float*>(sdO + TILE * LD);  // lse · log2 e of the query tile
  float* sD = sL + TILE;                                   // delta of the query tile
  const int kt = blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int w = (threadIdx.x / 32) * 16, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const int ld = 3 * C, k0 = kt * TILE, nq = (T + TILE - 1) / TILE;
  const int r0 = k0 + w + g, r1 = r0 + 8;  // this lane's keys
  const float* base = qkv + static_cast<std::size_t>(b) * T * ld + h * D;
  const float* dbase = dout + static_cast<std::size_t>(b) * T * C + h * D;
  stage<D>(sK, base + C, k0, T, ld, scale * LOG2E);
  stage<D>(sV, base + 2 * C, k0, T, ld, 1.f);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  for (int qt = kt; qt < nq; ++qt) {
    const int q0 = qt * TILE;
    __syncthreads();
    stage<D>(sQ, base, q0, T, ld, 1.f);
    stage<D>(sdO, dbase, q0, T, C, 1.f);
    if (threadIdx.x < TILE) {
      const int q = q0 + threadIdx.x;
      sL[threadIdx.x] = q < T ? lse[static_cast<std::size_t>(bh) * T + q] * LOG2E : 0.f;
      sD[threadIdx.x] = q < T ? delta[static_cast<std::size_t>(bh) * T + q] : 0.f;
    }
    __syncthreads();
    float st[TILE / 8][4] = {}, dp[TILE / 8][4] = {};
    #pragma unroll
    for (int k = 0; k < D / 8; ++k) {
      const std::uint32_t* ka = sK + (w + g) * LD + k * 8 + t;
      const std::uint32_t* va = sV + (w + g) * LD + k * 8 + t;
      const std::uint32_t k_0 = ka[0], k_1 = ka[8 * LD], k_2 = ka[4], k_3 = ka[8 * LD + 4];
      const std::uint32_t v_0 = va[0], v_1 = va[8 * LD], v_2 = va[4], v_3 = va[8 * LD + 4];
      #pragma unroll
      for (int n = 0; n < TILE / 8; ++n) {
        const std::uint32_t* qb = sQ + (n * 8 + g) * LD + k * 8 + t;
        const std::uint32_t* ob = sdO + (n * 8 + g) * LD + k * 8 + t;
        mma8(st[n], k_0, k_1, k_2, k_3, qb[0], qb[4]);
        mma8(dp[n], v_0, v_1, v_2, v_3, ob[0], ob[4]);
      }
    }
    // P^T (0 where the key is after the query or the query is past T) and dS^T = P^T (dP^T − delta).
    #pragma unroll
    for (int n = 0; n < TILE / 8; ++n)
      #pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t + e, q = q0 + c;
        const float p0 = q < T && r0 <= q ? exp2f(st[n][e] - sL[c]) : 0.f;
        const float p1 = q < T && r1 <= q ? exp2f(st[n][2 + e] - sL[c]) : 0.f;
        st[n][e] = p0;
        st[n][2 + e] = p1;
        dp[n][e] = p0 * (dp[n][e] - sD[c]);
        dp[n][2 + e] = p1 * (dp[n][2 + e] - sD[c]);
      }
    times_tile<D>(dv, st, sdO);
    times_tile<D>(dk, dp, sQ);
  }
  #pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int c = h * D + n * 8 + 2 * t;
    for (int half = 0; half < 2; ++half) {
      const int r = half ? r1 : r0;
      if (r >= T) continue;
      float* gk = dqkv + (static_cast<std::size_t>(b) * T + r) * ld + C + c;
      float* gv = gk + C;
      gk[0] += dk[n][2 * half] * scale;
      gk[1] += dk[n][2 * half + 1] * scale;
      gv[0] += dv[n][2 * half];
      gv[1] += dv[n][2 * half + 1];
    }
  }
}

// dQ of query tile blockIdx.x (the longest first) of head blockIdx.y, over keys up to the
// diagonal. Each warp holds its 16 queries' Q and dO fragments and dQ.
template <int D>
__global__ void __launch_bounds__(THREADS)
    mma_backward_q_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                          const float* delta, int T, int C, int NH, float scale) {
  extern __shared__ __align__(16) std::uint32_t sm[];
  std::uint32_t* sK = sm;
  std::uint32_t* sV = sK + TILE * (D + 4);
  const int qt = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const int ld = 3 * C, q0 = qt * TILE, r0 = q0 + (threadIdx.x / 32) * 16 + g, r1 = r0 + 8;
  const float* base = qkv + static_cast<std::size_t>(b) * T * ld + h * D;
  std::uint32_t qa[D / 8][4], oa[D / 8][4];
  row_fragments<D>(qa, base, r0, T, ld, scale * LOG2E);
  row_fragments<D>(oa, dout + static_cast<std::size_t>(b) * T * C + h * D, r0, T, C, 1.f);
  const std::size_t row = static_cast<std::size_t>(bh) * T;
  const float L0 = r0 < T ? lse[row + r0] * LOG2E : 0.f, L1 = r1 < T ? lse[row + r1] * LOG2E : 0.f;
  const float D0 = r0 < T ? delta[row + r0] : 0.f, D1 = r1 < T ? delta[row + r1] : 0.f;
  float dq[D / 8][4] = {};
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * TILE;
    __syncthreads();
    stage<D>(sK, base + C, k0, T, ld, 1.f);
    stage<D>(sV, base + 2 * C, k0, T, ld, 1.f);
    __syncthreads();
    float s[TILE / 8][4] = {}, dp[TILE / 8][4] = {};
    times_rows<D>(s, qa, sK);
    times_rows<D>(dp, oa, sV);
    #pragma unroll
    for (int n = 0; n < TILE / 8; ++n)
      #pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = k0 + n * 8 + 2 * t + e;
        const float p0 = r0 < T && key <= r0 ? exp2f(s[n][e] - L0) : 0.f;
        const float p1 = r1 < T && key <= r1 ? exp2f(s[n][2 + e] - L1) : 0.f;
        s[n][e] = p0 * (dp[n][e] - D0);  // dS
        s[n][2 + e] = p1 * (dp[n][2 + e] - D1);
      }
    times_tile<D>(dq, s, sK);
  }
  #pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int c = h * D + n * 8 + 2 * t;
    if (r0 < T) {
      float* gq = dqkv + (static_cast<std::size_t>(b) * T + r0) * ld + c;
      gq[0] += dq[n][0] * scale;
      gq[1] += dq[n][1] * scale;
    }
    if (r1 < T) {
      float* gq = dqkv + (static_cast<std::size_t>(b) * T + r1) * ld + c;
      gq[0] += dq[n][2] * scale;
      gq[1] += dq[n][3] * scale;
    }
  }
}


template <int D>
void forward(void* stream, float* out, float* lse, const float* qkv, int B, int Tn, int C, int NH) {
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  launch_tiles(mma_forward_kernel<D>, 2 * TILE * (D + 4), (Tn + TILE - 1) / TILE, B * NH, THREADS,
               stream, out, lse, qkv, Tn, C, NH, scale);
}

template <int D>
void backward(void* stream, float* dqkv, const float* delta, const float* dout, const float* qkv,
              const float* lse, int B, int Tn, int C, int NH) {
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const int tiles = (Tn + TILE - 1) / TILE;
  launch_tiles(mma_backward_kv_kernel<D>, 4 * TILE * (D + 4) + 2 * TILE, tiles, B * NH, THREADS,
               stream, dqkv, dout, qkv, lse, delta, Tn, C, NH, scale);
  launch_tiles(mma_backward_q_kernel<D>, 2 * TILE * (D + 4), tiles, B * NH, THREADS, stream, dqkv,
               dout, qkv, lse, delta, Tn, C, NH, scale);
}

}  // namespace

bool mma_attention_supported(int head_size) { return head_size == 32 || head_size == 64; }

void mma_attention_forward(void* stream, float* out, float* lse, const float* qkv, int B, int Tn,
                           int C, int NH) {
  if (static_cast<std::int64_t>(B) * Tn == 0) return;
  switch (C / NH) {
    case 32: return forward<32>(stream, out, lse, qkv, B, Tn, C, NH);
    case 64: return forward<64>(stream, out, lse, qkv, B, Tn, C, NH);
    default: fail_message("mma attention: head size " + std::to_string(C / NH) + " is not 32 or 64");
  }
}

void mma_attention_backward(void* stream, float* dqkv, const float* delta, const float* dout,
                            const float* qkv, const float* lse, int B, int Tn, int C, int NH) {
  if (static_cast<std::int64_t>(B) * Tn == 0) return;
  switch (C / NH) {
    case 32: return backward<32>(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
    case 64: return backward<64>(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
    default: fail_message("mma attention: head size " + std::to_string(C / NH) + " is not 32 or 64");
  }
}

}  // namespace pipeworks::cuda
