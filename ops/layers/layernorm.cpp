// Layer normalisation: fused single-row passes; the weight and bias gradients are summed per
// fixed chunk of rows and then across chunks, so the result does not depend on the threads.
#include "ops/layers/layernorm.hpp"

#include <cmath>
#include <vector>

#include "ops/kernels/parallel.hpp"
#include "ops/kernels/reduce.hpp"
#include "ops/kernels/scratch.hpp"

namespace pipeworks {
namespace {

constexpr std::int64_t row_grain_elements = 1 << 13;
// Rows per partial sum of dweight and dbias; fixed, so the summation order is too.
constexpr std::int64_t backward_chunk_rows = 32;

std::int64_t row_grain(int C) { return std::max<std::int64_t>(1, row_grain_elements / C); }

// One row of the backward: dx (C) +=, pw (C) += xhat dy, pb (C) += dy; xhat, g (C) scratch.
// Separate pointers marked restrict, so that every loop vectorises.
template <class T>
void backward_row(T* __restrict dx, T* __restrict pw, T* __restrict pb, T* __restrict xhat,
                  T* __restrict g, const T* __restrict x, const T* __restrict dy,
                  const T* __restrict w, T m, T s, int C) {
  for (int i = 0; i < C; i++) {
    xhat[i] = (x[i] - m) * s;
    g[i] = w[i] * dy[i];
    pw[i] += xhat[i] * dy[i];
    pb[i] += dy[i];
  }
  const T g_mean = row_sum(g, C) / T(C);
  const T gx_mean = row_dot(g, xhat, C) / T(C);
  for (int i = 0; i < C; i++) dx[i] += s * (g[i] - g_mean - xhat[i] * gx_mean);
}

}  // namespace

// N = rows, C = channels.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       std::int64_t N, int C) {
  parallel_for(N, row_grain(C), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t n = lo; n < hi; n++) {
      const T* x = inp + n * C;
      T* o = out + n * C;
      const T m = row_sum(x, C) / T(C);
      for (int i = 0; i < C; i++) o[i] = x[i] - m;  // centred row, in place in the output
      const T s = T(1) / std::sqrt(row_dot(o, o, C) / T(C) + T(layernorm_eps));
      for (int i = 0; i < C; i++) o[i] = o[i] * s * weight[i] + bias[i];
      mean[n] = m;
      rstd[n] = s;
    }
  });
}

// With xhat = (x - mean) rstd and g = weight * dout:
// dx = rstd (g - mean(g) - xhat mean(g xhat)); dweight += xhat dout; dbias += dout.
template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const T* mean, const T* rstd, std::int64_t N, int C) {
  const std::int64_t chunks = (N + backward_chunk_rows - 1) / backward_chunk_rows;
  // partials (chunks, 2, C): per chunk the dweight row, then the dbias row. A fresh buffer (a
  // few kB, microseconds): per-thread scratch is unsafe here because this thread may run other
  // oneTBB tasks while it waits for the loop below.
  std::vector<T> partial_buffer(std::size_t(chunks) * 2 * C);
  T* partials = partial_buffer.data();
  parallel_for(chunks, 1, [&](std::int64_t clo, std::int64_t chi) {
    T* row = thread_scratch<T>(2 * std::size_t(C), scratch_slot::layernorm_row);
    T* xhat = row;
    T* g = row + C;
    for (std::int64_t c = clo; c < chi; c++) {
      T* pw = partials + c * 2 * C;
      T* pb = pw + C;
      const std::int64_t end = std::min(N, (c + 1) * backward_chunk_rows);
      for (std::int64_t n = c * backward_chunk_rows; n < end; n++)
        backward_row(dinp + n * C, pw, pb, xhat, g, inp + n * C, dout + n * C, weight, mean[n],
                     rstd[n], C);
    }
  });
  for (std::int64_t c = 0; c < chunks; c++) {
    const T* pw = partials + c * 2 * C;
    for (int i = 0; i < C; i++) dweight[i] += pw[i];
    for (int i = 0; i < C; i++) dbias[i] += pw[C + i];
  }
}

// Counted per element: 8 FLOPs (mean, centring, variance, scaling, affine).
layer_cost layernorm_cost(std::int64_t positions, int C, int elem_bytes) {
  layer_cost c;
  c.param_bytes = 2 * std::int64_t(C) * elem_bytes;
  c.saved_bytes_per_sample = positions * (C + 2) * elem_bytes;
  c.output_bytes_per_sample = positions * C * elem_bytes;
  c.flops_per_sample = 8 * positions * C;
  return c;
}

#define PIPEWORKS_LAYERNORM(T)                                                                     \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t, int); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,          \
                                      const T*, std::int64_t, int);
PIPEWORKS_LAYERNORM(float)
PIPEWORKS_LAYERNORM(double)
#undef PIPEWORKS_LAYERNORM

}  // namespace pipeworks
