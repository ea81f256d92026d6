// AdamW's per-step coefficients, computed once in double and rounded to T: shared by the CPU
// update (ops/optim/adamw.cpp) and the CUDA kernel (ops/cuda/adamw_cuda.cu), so both apply the
// same numbers. Plain C++17 (nvcc compiles it).
#pragma once
#include <cmath>
#include <cstdint>

namespace pipeworks {

template <class T>
struct adamw_coeffs {
  T decay, b1, b2, one_b1, one_b2, step_size, bc2_sqrt, eps;
};

// For step t (from 1): decay = 1 - lr*wd, step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t).
template <class T>
adamw_coeffs<T> adamw_coefficients(std::int64_t t, double lr, double beta1, double beta2,
                                   double eps, double weight_decay) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  return {static_cast<T>(1.0 - lr * weight_decay), static_cast<T>(beta1), static_cast<T>(beta2),
          static_cast<T>(1.0 - beta1),             static_cast<T>(1.0 - beta2),
          static_cast<T>(lr / bc1),                static_cast<T>(std::sqrt(bc2)),
          static_cast<T>(eps)};
}

}  // namespace pipeworks
