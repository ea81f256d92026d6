// FlashAttention-2's causal attention on TF32 tensor cores through WMMA (heads of 16 and 128, or
// asked for; 32 and 64 go to attention_mma_cuda.cu): a block of 4 warps takes a 64-row tile of
// one head, each warp 16 rows; products go through shared memory, where the element-wise work
// (online softmax, P and dS) is done. Backward is two kernels (keys, then
// queries) so that no two blocks add into the same gradient: the result repeats bit for bit.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "ops/cuda/attention_flash_cuda.hpp"
#include "ops/cuda/attention_mma_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/tile_launch.cuh"
#include "ops/cuda/warp_reduce.cuh"

namespace pipeworks::cuda {
namespace {

using namespace nvcuda;

constexpr int TILE = 64;     // query rows and key columns of a tile
constexpr int THREADS = 128;  // 4 warps of 16 rows each
constexpr int LS = TILE + 4;  // row stride of a TILE x TILE tile in shared memory

using frag_acc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
using a_row = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using a_col = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using b_row = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using b_col = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;

// The floats of the forward's scores tile, which first stages the D-wide Q tile.
__host__ __device__ constexpr std::size_t square_floats(int D) { return TILE * (LS > D + 4 ? LS : D + 4); }
// The shared memory of the forward (K, V, O, the scores, two per-row vectors) and of each backward
// kernel (four D-wide tiles, two 64 x 64 ones, two per-row vectors), in floats.
constexpr std::size_t forward_floats(int D) { return 3 * TILE * (D + 4) + square_floats(D) + 2 * TILE; }
constexpr std::size_t backward_floats(int D) { return 4 * TILE * (D + 4) + 2 * TILE * LS + 2 * TILE; }
// A grid's y dimension (the B * NH heads) is at most 65535.
constexpr int max_heads = 65535;

template <class F>
__device__ inline void load_tf32(F& f, const float* p, int ld) {
  wmma::load_matrix_sync(f, p, ld);
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = wmma::__float_to_tf32(f.x[i]);
}

// acc[n] += A (16 x K) B_n (K x 16) for n < N. Each 8-deep slice of A is a_step floats further
// on, of B_n b_step; B_n starts b_next floats after B_(n-1). A slice of A is loaded once for all N.
template <class FA, class FB, int N>
__device__ inline void mma_n(frag_acc (&acc)[N], int K, const float* a, int lda, int a_step,
                             const float* b, int ldb, int b_step, int b_next) {
  FA fa;
  FB fb;
  #pragma unroll
  for (int k = 0; k < K; k += 8, a += a_step, b += b_step) {
    load_tf32(fa, a, lda);
    #pragma unroll
    for (int n = 0; n < N; ++n) {
      load_tf32(fb, b + n * b_next, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// Rows [r0, r0 + TILE) of a head's (T, D) slice of g (row stride ld) into s (row stride D + 4);
// rows at or after T are zero.
template <int D>
__device__ inline void load_tile(float* s, const float* g, int r0, int T, int ld) {
  constexpr int V = D / 4;
  for (int i = threadIdx.x; i < TILE * V; i += THREADS) {
    const int r = i / V, c = (i % V) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < T) v = *reinterpret_cast<const float4*>(g + static_cast<std::size_t>(r0 + r) * ld + c);
    *reinterpret_cast<float4*>(s + r * (D + 4) + c) = v;
  }
}

// The per-row values (lse or delta) of rows [r0, r0 + TILE) of one head; 0 after T.
__device__ inline void load_rows(float* s, const float* g, int r0, int T) {
  if (threadIdx.x < TILE) s[threadIdx.x] = r0 + threadIdx.x < T ? g[r0 + threadIdx.x] : 0.f;
}

// S (the warp's 16 rows x 64 keys) = A B^T into s, A and B two (64, D) tiles of stride D + 4.
template <int D>
__device__ inline void scores(float* s, const float* a, const float* b) {
  constexpr int LD = D + 4;
  frag_acc acc[TILE / 16];
  #pragma unroll
  for (int n = 0; n < TILE / 16; ++n) wmma::fill_fragment(acc[n], 0.f);
  mma_n<a_row, b_col>(acc, D, a, LD, 8, b, LD, 8, 16 * LD);
  #pragma unroll
  for (int n = 0; n < TILE / 16; ++n)
    wmma::store_matrix_sync(s + n * 16, acc[n], LS, wmma::mem_row_major);
}

// One block: query tile blockIdx.x (the longest first) of head blockIdx.y = b * NH + h. Each warp
// keeps its 16 query rows in registers, as TF32 fragments, for the whole kernel.
template <int D>
__global__ void __launch_bounds__(THREADS)
    flash_forward_kernel(float* out, float* lse, const float* qkv, int T, int C, int NH,
                         float scale) {
  constexpr int LD = D + 4;
  extern __shared__ __align__(128) float smem[];
  float* sK = smem;
  float* sV = sK + TILE * LD;
  float* sO = sV + TILE * LD;
  float* sS = sO + TILE * LD;           // the Q tile (stride LD) first, then scores (stride LS)
  float* sM = sS + square_floats(D);  // running maxima
  float* sL = sM + TILE;                // running sums
  const int qt = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w0 = warp * 16;
  const int ld = 3 * C, q0 = qt * TILE;
  const float* base = qkv + static_cast<std::size_t>(b) * T * ld + h * D;
  load_tile<D>(sS, base, q0, T, ld);
  for (int i = threadIdx.x; i < TILE * LD; i += THREADS) sO[i] = 0.f;
  if (threadIdx.x < TILE) {
    sM[threadIdx.x] = -INFINITY;
    sL[threadIdx.x] = 0.f;
  }
  __syncthreads();
  a_row qf[D / 8];
  #pragma unroll
  for (int k = 0; k < D / 8; ++k) load_tf32(qf[k], sS + w0 * LD + k * 8, LD);
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * TILE;
    __syncthreads();  // (also: every warp has its Q fragments before sS takes scores)
    load_tile<D>(sK, base + C, k0, T, ld);
    load_tile<D>(sV, base + 2 * C, k0, T, ld);
    __syncthreads();
    {  // S = Q K^T for the warp's rows
      frag_acc acc[TILE / 16];
      b_col fb;
      #pragma unroll
      for (int n = 0; n < TILE / 16; ++n) wmma::fill_fragment(acc[n], 0.f);
      #pragma unroll
      for (int k = 0; k < D / 8; ++k)
        #pragma unroll
        for (int n = 0; n < TILE / 16; ++n) {
          load_tf32(fb, sK + n * 16 * LD + k * 8, LD);
          wmma::mma_sync(acc[n], qf[k], fb, acc[n]);
        }
      #pragma unroll
      for (int n = 0; n < TILE / 16; ++n)
        wmma::store_matrix_sync(sS + w0 * LS + n * 16, acc[n], LS, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax of the warp's rows, two lanes a row, each over 32 keys (key k0 + c counts
    // when it is at most the query's t), read rotated by lane so that no two lanes share a bank.
    {
      const int r = w0 + lane / 2, half = lane % 2, t = q0 + r, kb = k0 + half * 32;
      float* row = sS + r * LS + half * 32;
      float mx = -INFINITY;
      #pragma unroll 8
      for (int j = 0; j < 32; ++j) {
        const int c = (j + lane) % 32;
        if (kb + c <= t) mx = fmaxf(mx, row[c]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)) * scale;  // finite: key k0 <= t
      const float m_old = sM[r], m_new = fmaxf(m_old, mx);
      float sum = 0.f;
      #pragma unroll 8
      for (int j = 0; j < 32; ++j) {
        const int c = (j + lane) % 32;
        const float p = kb + c <= t ? expf(row[c] * scale - m_new) : 0.f;
        row[c] = p;
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const float alpha = expf(m_old - m_new);
      __syncwarp();  // both lanes of the row have read sM[r]
      if (half == 0) {
        sL[r] = sL[r] * alpha + sum;
        sM[r] = m_new;
      }
      float* o = sO + r * LD + half * (D / 2);
      #pragma unroll 8
      for (int j = 0; j < D / 2; ++j) o[(j + lane) % (D / 2)] *= alpha;
    }
    __syncwarp();
    // O (the warp's rows) += P V.
    {
      frag_acc acc[D / 16];
      #pragma unroll
      for (int n = 0; n < D / 16; ++n)
        wmma::load_matrix_sync(acc[n], sO + w0 * LD + n * 16, LD, wmma::mem_row_major);
      mma_n<a_row, b_row>(acc, TILE, sS + w0 * LS, LS, 8, sV, LD, 8 * LD, 16);
      #pragma unroll
      for (int n = 0; n < D / 16; ++n)
        wmma::store_matrix_sync(sO + w0 * LD + n * 16, acc[n], LD, wmma::mem_row_major);
    }
    __syncwarp();
  }
  for (int i = lane; i < 16 * D; i += 32) {
    const int r = w0 + i / D, c = i % D, t = q0 + r;
    if (t < T) out[(static_cast<std::size_t>(b) * T + t) * C + h * D + c] = sO[r * LD + c] / sL[r];
  }
  if (lane < 16 && q0 + w0 + lane < T)
    lse[static_cast<std::size_t>(bh) * T + q0 + w0 + lane] = sM[w0 + lane] + logf(sL[w0 + lane]);
}

// delta (B, NH, T) = each row's dout . out over its head: one warp per (b, t, h).
__global__ void flash_delta_kernel(float* delta, const float* dout, const float* out, int B, int T,
                                   int C, int NH) {
  const std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (w >= static_cast<std::int64_t>(B) * T * NH) return;
  const int lane = threadIdx.x % 32, D = C / NH, h = static_cast<int>(w % NH);
  const std::int64_t bt = w / NH;
  const float* o = out + bt * C + h * D;
  const float* g = dout + bt * C + h * D;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += o[c] * g[c];
  s = warp_sum(s);
  const std::int64_t b = bt / T, t = bt % T;
  if (lane == 0) delta[(b * NH + h) * T + t] = s;
}

// P = exp(S scale - lse) (0 where the key is after the query or the row is past T) into sP, and
// dS = P (dP - delta) over dP in sdS, for the warp's 16 rows.
__device__ inline void probabilities(float* sP, float* sdS, const float* sLse, const float* sDel,
                                     int w0, int q0, int k0, int T, float scale) {
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < 16 * TILE; i += 32) {
    const int r = w0 + i / TILE, c = i % TILE, t = q0 + r;
    float p = 0.f;
    if (t < T && k0 + c <= t) p = expf(sP[r * LS + c] * scale - sLse[r]);
    sP[r * LS + c] = p;
    sdS[r * LS + c] = p * (sdS[r * LS + c] - sDel[r]);
  }
}

// dK and dV of key tile blockIdx.x (tile 0, the longest, first) of head blockIdx.y, summed over
// the query tiles from the diagonal on.
template <int D>
__global__ void __launch_bounds__(THREADS)
    flash_backward_kv_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                             const float* delta, int T, int C, int NH, float scale) {
  constexpr int LD = D + 4;
  extern __shared__ __align__(128) float smem[];
  float* sK = smem;
  float* sV = sK + TILE * LD;
  float* sQ = sV + TILE * LD;
  float* sdO = sQ + TILE * LD;
  float* sP = sdO + TILE * LD;
  float* sdS = sP + TILE * LS;
  float* sLse = sdS + TILE * LS;
  float* sDel = sLse + TILE;
  const int kt = blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w0 = warp * 16;
  const int ld = 3 * C, k0 = kt * TILE, nq = (T + TILE - 1) / TILE;
  const float* base = qkv + static_cast<std::size_t>(b) * T * ld + h * D;
  const float* dbase = dout + static_cast<std::size_t>(b) * T * C + h * D;
  load_tile<D>(sK, base + C, k0, T, ld);
  load_tile<D>(sV, base + 2 * C, k0, T, ld);
  frag_acc dk[D / 16], dv[D / 16];
  #pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.f);
    wmma::fill_fragment(dv[n], 0.f);
  }
  for (int qt = kt; qt < nq; ++qt) {
    const int q0 = qt * TILE;
    __syncthreads();
    load_tile<D>(sQ, base, q0, T, ld);
    load_tile<D>(sdO, dbase, q0, T, C);
    load_rows(sLse, lse + static_cast<std::size_t>(bh) * T, q0, T);
    load_rows(sDel, delta + static_cast<std::size_t>(bh) * T, q0, T);
    __syncthreads();
    scores<D>(sP + w0 * LS, sQ + w0 * LD, sK);    // S, query rows of this warp
    scores<D>(sdS + w0 * LS, sdO + w0 * LD, sV);  // dP = dO V^T
    __syncwarp();
    probabilities(sP, sdS, sLse, sDel, w0, q0, k0, T, scale);
    __syncthreads();
    // The warp's 16 keys: dV += P^T dO and dK += dS^T Q over the tile's 64 queries.
    mma_n<a_col, b_row>(dv, TILE, sP + w0, LS, 8 * LS, sdO, LD, 8 * LD, 16);
    mma_n<a_col, b_row>(dk, TILE, sdS + w0, LS, 8 * LS, sQ, LD, 8 * LD, 16);
  }
  __syncthreads();
  #pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    #pragma unroll
    for (int i = 0; i < dk[n].num_elements; ++i) dk[n].x[i] *= scale;
    wmma::store_matrix_sync(sQ + w0 * LD + n * 16, dk[n], LD, wmma::mem_row_major);
    wmma::store_matrix_sync(sdO + w0 * LD + n * 16, dv[n], LD, wmma::mem_row_major);
  }
  __syncwarp();
  for (int i = lane; i < 16 * D; i += 32) {
    const int r = w0 + i / D, c = i % D, t = k0 + r;
    if (t >= T) continue;
    float* g = dqkv + (static_cast<std::size_t>(b) * T + t) * ld + h * D + c;
    g[C] += sQ[r * LD + c];
    g[2 * C] += sdO[r * LD + c];
  }
}

// dQ of query tile blockIdx.x (the longest first) of head blockIdx.y, over keys up to the diagonal.
template <int D>
__global__ void __launch_bounds__(THREADS)
    flash_backward_q_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                            const float* delta, int T, int C, int NH, float scale) {
  constexpr int LD = D + 4;
  extern __shared__ __align__(128) float smem[];
  float* sQ = smem;
  float* sdO = sQ + TILE * LD;
  float* sK = sdO + TILE * LD;
  float* sV = sK + TILE * LD;
  float* sP = sV + TILE * LD;
  float* sdS = sP + TILE * LS;
  float* sLse = sdS + TILE * LS;
  float* sDel = sLse + TILE;
  const int qt = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w0 = warp * 16;
  const int ld = 3 * C, q0 = qt * TILE;
  const float* base = qkv + static_cast<std::size_t>(b) * T * ld + h * D;
  load_tile<D>(sQ, base, q0, T, ld);
  load_tile<D>(sdO, dout + static_cast<std::size_t>(b) * T * C + h * D, q0, T, C);
  load_rows(sLse, lse + static_cast<std::size_t>(bh) * T, q0, T);
  load_rows(sDel, delta + static_cast<std::size_t>(bh) * T, q0, T);
  frag_acc dq[D / 16];
  #pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dq[n], 0.f);
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * TILE;
    __syncthreads();
    load_tile<D>(sK, base + C, k0, T, ld);
    load_tile<D>(sV, base + 2 * C, k0, T, ld);
    __syncthreads();
    scores<D>(sP + w0 * LS, sQ + w0 * LD, sK);
    scores<D>(sdS + w0 * LS, sdO + w0 * LD, sV);
    __syncwarp();
    probabilities(sP, sdS, sLse, sDel, w0, q0, k0, T, scale);
    __syncwarp();
    // The warp's 16 queries: dQ += dS K.
    mma_n<a_row, b_row>(dq, TILE, sdS + w0 * LS, LS, 8, sK, LD, 8 * LD, 16);
  }
  // Only this warp reads its rows of sQ: they take its dQ.
  #pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    for (int i = 0; i < dq[n].num_elements; ++i) dq[n].x[i] *= scale;
    wmma::store_matrix_sync(sQ + w0 * LD + n * 16, dq[n], LD, wmma::mem_row_major);
  }
  __syncwarp();
  for (int i = lane; i < 16 * D; i += 32) {
    const int r = w0 + i / D, c = i % D, t = q0 + r;
    if (t < T) dqkv[(static_cast<std::size_t>(b) * T + t) * ld + h * D + c] += sQ[r * LD + c];
  }
}

std::size_t smem_optin() {
  int dev = 0, bytes = 0;
  PW_CUDA(cudaGetDevice(&dev));
  PW_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return static_cast<std::size_t>(bytes);
}


template <int D>
void forward(void* stream, float* out, float* lse, const float* qkv, int B, int Tn, int C, int NH) {
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  launch_tiles(flash_forward_kernel<D>, forward_floats(D), (Tn + TILE - 1) / TILE, B * NH, THREADS,
               stream, out, lse, qkv, Tn, C, NH, scale);
}

template <int D>
void backward(void* stream, float* dqkv, const float* delta, const float* dout, const float* qkv,
              const float* lse, int B, int Tn, int C, int NH) {
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const int tiles = (Tn + TILE - 1) / TILE;
  launch_tiles(flash_backward_kv_kernel<D>, backward_floats(D), tiles, B * NH, THREADS, stream,
               dqkv, dout, qkv, lse, delta, Tn, C, NH, scale);
  launch_tiles(flash_backward_q_kernel<D>, backward_floats(D), tiles, B * NH, THREADS, stream, dqkv,
               dout, qkv, lse, delta, Tn, C, NH, scale);
}

}  // namespace

bool flash_attention_supported(int head_size, std::int64_t heads) {
  if (head_size != 16 && head_size != 32 && head_size != 64 && head_size != 128) return false;
  if (heads > max_heads) return false;
  return std::max(forward_floats(head_size), backward_floats(head_size)) * sizeof(float) <=
         smem_optin();
}

namespace {
void check_heads(int B, int NH) {
  if (static_cast<std::int64_t>(B) * NH > max_heads)
    fail_message("flash attention: " + std::to_string(static_cast<std::int64_t>(B) * NH) +
                 " heads (batch x heads) are more than a grid's 65535: use attention_gemm_cuda.hpp");
}
}  // namespace

void flash_attention_forward(void* stream, float* out, float* lse, const float* qkv, int B, int Tn,
                             int C, int NH, flash_kernels kernels) {
  if (static_cast<std::int64_t>(B) * Tn == 0) return;
  check_heads(B, NH);
  if (kernels == flash_kernels::fastest && mma_attention_supported(C / NH))
    return mma_attention_forward(stream, out, lse, qkv, B, Tn, C, NH);
  switch (C / NH) {
    case 16: return forward<16>(stream, out, lse, qkv, B, Tn, C, NH);
    case 32: return forward<32>(stream, out, lse, qkv, B, Tn, C, NH);
    case 64: return forward<64>(stream, out, lse, qkv, B, Tn, C, NH);
    case 128: return forward<128>(stream, out, lse, qkv, B, Tn, C, NH);
    default: fail_message("flash attention: head size " + std::to_string(C / NH) +
                          " is not 16, 32, 64 or 128: use attention_gemm_cuda.hpp");
  }
}

void flash_attention_backward(void* stream, float* dqkv, float* delta, const float* dout,
                              const float* out, const float* qkv, const float* lse, int B, int Tn,
                              int C, int NH, flash_kernels kernels) {
  if (static_cast<std::int64_t>(B) * Tn == 0) return;
  check_heads(B, NH);
  const std::int64_t rows = static_cast<std::int64_t>(B) * Tn * NH;
  flash_delta_kernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0,
                       static_cast<cudaStream_t>(stream)>>>(delta, dout, out, B, Tn, C, NH);
  PW_CUDA(cudaGetLastError());
  if (kernels == flash_kernels::fastest && mma_attention_supported(C / NH))
    return mma_attention_backward(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
  switch (C / NH) {
    case 16: return backward<16>(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
    case 32: return backward<32>(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
    case 64: return backward<64>(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
    case 128: return backward<128>(stream, dqkv, delta, dout, qkv, lse, B, Tn, C, NH);
    default: fail_message("flash attention: head size " + std::to_string(C / NH) +
                          " is not 16, 32, 64 or 128: use attention_gemm_cuda.hpp");
  }
}

}  // namespace pipeworks::cuda
