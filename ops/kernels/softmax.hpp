// Numerically stable softmax of one row and its backward, for attention and cross-entropy.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/kernels/fast_math.hpp"
#include "ops/kernels/reduce.hpp"

namespace pipeworks {

// p[0..n) = softmax(x[0..n)), computed as exp(x - max) / sum; p may equal x. n >= 1.
// Returns log(sum(exp(x))), the log-sum-exp of the row.
template <class T>
T softmax_row(T* p, const T* x, std::int64_t n) {
  const T m = row_max(x, n);
  for (std::int64_t i = 0; i < n; i++) p[i] = fast_exp(x[i] - m);
  const T s = row_sum(p, n);
  const T inv = T(1) / s;
  for (std::int64_t i = 0; i < n; i++) p[i] *= inv;
  return m + std::log(s);
}

// dx[0..n) = p * (dp - sum(p * dp)): the gradient through softmax, written (not added).
// dx may equal dp.
template <class T>
void softmax_backward_row(T* dx, const T* p, const T* dp, std::int64_t n) {
  const T pdp = row_dot(p, dp, n);
  for (std::int64_t i = 0; i < n; i++) dx[i] = p[i] * (dp[i] - pdp);
}

}  // namespace pipeworks
