// Linear layer over the gemm kernel: out = inp · W + b, in GPT-2's Conv1D layout or nn.Linear's.
#include "ops/layers/linear.hpp"

#include <algorithm>
#include <climits>

#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"
#include "base/result.hpp"

namespace pipeworks {
namespace {

int checked_rows(std::int64_t N) {
  if (N > INT_MAX)
    throw pipeworks_error("linear: " + std::to_string(N) + " rows exceed the BLAS limit");
  return static_cast<int>(N);
}

// Elements per parallel chunk of the bias loops.
constexpr std::int64_t bias_grain = 1 << 14;

}  // namespace

// N = rows, C = input channels, OC = output channels.
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, std::int64_t N, int C,
                    int OC, weight_layout layout) {
  const bool out_in = layout == weight_layout::out_in;
  T beta = 0;
  if (bias) {  // out starts as the bias in every row; the product is added to it
    parallel_for(N, std::max<std::int64_t>(1, bias_grain / OC),
                 [&](std::int64_t lo, std::int64_t hi) {
                   for (std::int64_t n = lo; n < hi; n++)
                     for (int o = 0; o < OC; o++) out[n * OC + o] = bias[o];
                 });
    beta = 1;
  }
  // out (N, OC) += inp (N, C) · W, with W (C, OC) or W^T for (OC, C)
  gemm(false, out_in, checked_rows(N), OC, C, T(1), inp, C, weight, out_in ? C : OC, beta, out, OC);
}

template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     std::int64_t N, int C, int OC, weight_layout layout, grad_into dinp_into) {
  const bool out_in = layout == weight_layout::out_in;
  const int rows = checked_rows(N);
  if (dinp) {  // dinp (N, C) += dout (N, OC) · W^T, or = with beta 0
    const T beta = dinp_into == grad_into::overwrite ? T(0) : T(1);
    gemm(false, !out_in, rows, C, OC, T(1), dout, OC, weight, out_in ? C : OC, beta, dinp, C);
  }
  if (dweight) {
    if (out_in)  // dW (OC, C) += dout^T (OC, N) · inp (N, C)
      gemm(true, false, OC, C, rows, T(1), dout, OC, inp, C, T(1), dweight, C);
    else  // dW (C, OC) += inp^T (C, N) · dout (N, OC)
      gemm(true, false, C, OC, rows, T(1), inp, C, dout, OC, T(1), dweight, OC);
  }
  if (dbias) {  // dbias (OC) += column sums of dout; split over columns, so no two tasks share one
    const std::int64_t col_grain =
        std::max<std::int64_t>(32, bias_grain / std::max<std::int64_t>(N, 1));
    parallel_for(OC, col_grain, [&](std::int64_t lo, std::int64_t hi) {
      // Each column adds its rows in order onto dbias, as ever; the running sums live in a local
      // array, which dout cannot alias, so they stay in cache lines the compiler keeps at hand.
      constexpr std::int64_t width = 64;
      for (std::int64_t o0 = lo; o0 < hi; o0 += width) {
        const std::int64_t w = std::min(width, hi - o0);
        T acc[width];
        std::copy_n(dbias + o0, w, acc);
        for (std::int64_t n = 0; n < N; n++) {
          const T* row = dout + n * OC + o0;
          for (std::int64_t j = 0; j < w; j++) acc[j] += row[j];
        }
        std::copy_n(acc, w, dbias + o0);
      }
    });
  }
}

// Counted: the multiply-adds of the product (2 FLOPs each) plus one add per output for the bias.
layer_cost linear_cost(std::int64_t positions, int C, int OC, bool bias, int elem_bytes) {
  layer_cost c;
  c.param_bytes = (std::int64_t(C) * OC + (bias ? OC : 0)) * elem_bytes;
  c.saved_bytes_per_sample = positions * C * elem_bytes;
  c.output_bytes_per_sample = positions * OC * elem_bytes;
  c.flops_per_sample = 2 * positions * C * OC + (bias ? positions * OC : 0);
  return c;
}

#define PIPEWORKS_LINEAR(T)                                                                     \
  template void linear_forward<T>(T*, const T*, const T*, const T*, std::int64_t, int, int,     \
                                  weight_layout);                                               \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t, int, \
                                   int, weight_layout, grad_into);
PIPEWORKS_LINEAR(float)
PIPEWORKS_LINEAR(double)
#undef PIPEWORKS_LINEAR

}  // namespace pipeworks
