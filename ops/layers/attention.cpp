// Causal multi-head self-attention with GEMMs per (batch, head), parallel over B*NH with oneTBB.
// Rows are processed in blocks so that the products skip most of the masked upper triangle.
#include "ops/layers/attention.hpp"

#include <algorithm>
#include <cmath>

#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/kernels/scratch.hpp"
#include "ops/kernels/softmax.hpp"

namespace pipeworks {
namespace {

// Query rows per block; block r0..r1 only needs keys 0..r1.
constexpr int row_block = 32;

}  // namespace

// B = batch, T = sequence length, C = channels, NH = heads, hs = C / NH.
// For each (b, h): att = softmax(mask(q k^T / sqrt(hs))) (T, T); out_h = att v (T, hs).
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  parallel_for(std::int64_t(B) * NH, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t bh = lo; bh < hi; bh++) {
      const std::int64_t b = bh / NH, h = bh % NH;
      const T* q = qkv + b * Tn * C3 + h * hs;  // (T, hs) rows of stride 3C
      const T* k = q + C;
      const T* v = q + 2 * C;
      T* a = att + bh * Tn * Tn;         // (T, T)
      T* o = out + b * Tn * C + h * hs;  // (T, hs) rows of stride C
      for (int r0 = 0; r0 < Tn; r0 += row_block) {
        const int r1 = std::min(Tn, r0 + row_block), rows = r1 - r0;
        // a[r0:r1, 0:r1] = scale q[r0:r1] k[0:r1]^T
        gemm_serial(false, true, rows, r1, hs, scale, q + std::int64_t(r0) * C3, C3, k, C3, T(0),
                    a + std::int64_t(r0) * Tn, Tn);
        for (int t = r0; t < r1; t++) {
          T* row = a + std::int64_t(t) * Tn;
          softmax_row(row, row, t + 1);
          for (int j = t + 1; j < Tn; j++) row[j] = T(0);
        }
        // o[r0:r1] = a[r0:r1, 0:r1] v[0:r1]
        gemm_serial(false, false, rows, hs, r1, T(1), a + std::int64_t(r0) * Tn, Tn, v, C3, T(0),
                    o + std::int64_t(r0) * C, C);
      }
    }
  });
}

// Per (b, h), with da and dp (T, T) scratch:
// da = dout_h v^T; dv += att^T dout_h; dp = softmax_backward(att, da);
// dq += scale dp k; dk += scale dp^T q.
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int NH, grad_into into) {
  const int hs = C / NH, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  parallel_for(std::int64_t(B) * NH, 1, [&](std::int64_t lo, std::int64_t hi) {
    T* da = thread_scratch<T>(std::size_t(Tn) * Tn, scratch_slot::attention);
    for (std::int64_t bh = lo; bh < hi; bh++) {
      const std::int64_t b = bh / NH, h = bh % NH;
      const std::int64_t base = b * Tn * C3 + h * hs;
      const T* q = qkv + base;
      const T* k = q + C;
      const T* v = q + 2 * C;
      T* dq = dqkv + base;
      T* dk = dq + C;
      T* dv = dq + 2 * C;
      const T* a = att + bh * Tn * Tn;
      const T* dyo = dout + b * Tn * C + h * hs;
      if (into == grad_into::overwrite)
        for (int t = 0; t < Tn; t++)
          for (T* part : {dq, dk, dv}) std::fill_n(part + std::int64_t(t) * C3, hs, T(0));
      for (int r0 = 0; r0 < Tn; r0 += row_block) {
        const int r1 = std::min(Tn, r0 + row_block), rows = r1 - r0;
        const T* ar = a + std::int64_t(r0) * Tn;
        T* dar = da + std::int64_t(r0) * Tn;
        const T* dyr = dyo + std::int64_t(r0) * C;
        // da[r0:r1, 0:r1] = dout[r0:r1] v[0:r1]^T
        gemm_serial(false, true, rows, r1, hs, T(1), dyr, C, v, C3, T(0), dar, Tn);
        // dv[0:r1] += a[r0:r1, 0:r1]^T dout[r0:r1]
        gemm_serial(true, false, r1, hs, rows, T(1), ar, Tn, dyr, C, T(1), dv, C3);
        for (int t = r0; t < r1; t++) {
          T* row = da + std::int64_t(t) * Tn;
          softmax_backward_row(row, a + std::int64_t(t) * Tn, row, t + 1);
          for (int j = t + 1; j < r1; j++) row[j] = T(0);
        }
        // dq[r0:r1] += scale dp[r0:r1, 0:r1] k[0:r1]
        gemm_serial(false, false, rows, hs, r1, scale, dar, Tn, k, C3, T(1),
                    dq + std::int64_t(r0) * C3, C3);
        // dk[0:r1] += scale dp[r0:r1, 0:r1]^T q[r0:r1]
        gemm_serial(true, false, r1, hs, rows, scale, dar, Tn, q + std::int64_t(r0) * C3, C3, T(1),
                    dk, C3);
      }
    }
  });
}

// Counted: the multiply-adds the forward's products perform (2 FLOPs each, causal row blocks
// included) plus 5 FLOPs per attention entry for the softmax and the mask.
layer_cost attention_cost(int Tn, int C, int NH, int elem_bytes) {
  std::int64_t product_cols = 0;  // sum over query rows of the keys the blocked products touch
  for (int r0 = 0; r0 < Tn; r0 += row_block) {
    const int r1 = std::min(Tn, r0 + row_block);
    product_cols += std::int64_t(r1 - r0) * r1;
  }
  layer_cost c;
  c.saved_bytes_per_sample = (3 * std::int64_t(Tn) * C + std::int64_t(NH) * Tn * Tn) * elem_bytes;
  c.output_bytes_per_sample = std::int64_t(Tn) * C * elem_bytes;
  c.flops_per_sample = 2 * 2 * product_cols * C + 5 * std::int64_t(NH) * Tn * Tn;
  return c;
}

#define PIPEWORKS_ATTENTION(T)                                              \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int); \
  template void attention_backward<T>(T*, const T*, const T*, const T*, int, int, int, int,    \
                                      grad_into);
PIPEWORKS_ATTENTION(float)
PIPEWORKS_ATTENTION(double)
#undef PIPEWORKS_ATTENTION

}  // namespace pipeworks
