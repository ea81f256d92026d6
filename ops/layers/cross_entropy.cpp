// Softmax cross-entropy, parallel over positions: the mean of logsumexp(logits) - logit[target],
// finite for any finite logits. A target outside [0, V) throws, naming its position.
#include "ops/layers/cross_entropy.hpp"

#include "ops/kernels/parallel.hpp"
#include "ops/kernels/softmax.hpp"
#include "base/result.hpp"

namespace pipeworks {
namespace {

constexpr std::int64_t elements_grain = 1 << 14;

std::int64_t row_grain(int V) { return std::max<std::int64_t>(1, elements_grain / V); }

}  // namespace

// N = positions, V = classes.
template <class T>
T cross_entropy_forward(T* probs, const T* logits, const std::int32_t* targets, std::int64_t N,
                        int V) {
  const T total = parallel_sum<T>(N, row_grain(V), [&](std::int64_t lo, std::int64_t hi) {
    T sum = 0;
    for (std::int64_t n = lo; n < hi; n++) {
      const std::int32_t t = targets[n];
      if (t < 0 || t >= V)
        throw pipeworks_error("cross_entropy: target " + std::to_string(t) + " at position " +
                              std::to_string(n) + " is outside [0, " + std::to_string(V) + ")");
      const T lse = softmax_row(probs + n * V, logits + n * V, V);
      sum += lse - logits[n * V + t];
    }
    return sum;
  });
  return total / T(N);
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets, T dloss,
                            std::int64_t N, int V) {
  const T g = dloss / T(N);
  parallel_for(N, row_grain(V), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t n = lo; n < hi; n++) {
      T* d = dlogits + n * V;
      const T* p = probs + n * V;
      for (int i = 0; i < V; i++) d[i] += p[i] * g;
      d[targets[n]] -= g;
    }
  });
}

// Counted per logit: 5 FLOPs (max, subtract, exp as one, sum, normalise). Saved: the
// probabilities and the targets. Output: the sample's share of the scalar loss, one element.
layer_cost cross_entropy_cost(std::int64_t positions, int V, int elem_bytes) {
  layer_cost c;
  c.saved_bytes_per_sample =
      positions * V * elem_bytes + positions * std::int64_t(sizeof(std::int32_t));
  c.output_bytes_per_sample = elem_bytes;
  c.flops_per_sample = 5 * positions * V;
  return c;
}

#define PIPEWORKS_CROSS_ENTROPY(T)                                                           \
  template T cross_entropy_forward<T>(T*, const T*, const std::int32_t*, std::int64_t, int); \
  template void cross_entropy_backward<T>(T*, const T*, const std::int32_t*, T, std::int64_t, int);
PIPEWORKS_CROSS_ENTROPY(float)
PIPEWORKS_CROSS_ENTROPY(double)
#undef PIPEWORKS_CROSS_ENTROPY

}  // namespace pipeworks
