// ReLU and GELU (tanh approximation), elementwise and parallel over chunks of the input.
#include "ops/layers/activation.hpp"

#include <cmath>
#include <numbers>

#include "ops/kernels/fast_math.hpp"
#include "ops/kernels/parallel.hpp"

namespace pipeworks {
namespace {

constexpr std::int64_t elementwise_grain = 1 << 15;
constexpr double gelu_k = 0.044715;

}  // namespace

// n = number of elements; every buffer is (n).
template <class T>
void relu_forward(T* out, const T* inp, std::int64_t n) {
  parallel_for(n, elementwise_grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; i++) out[i] = inp[i] > T(0) ? inp[i] : T(0);
  });
}

template <class T>
void relu_backward(T* dinp, const T* dout, const T* inp, std::int64_t n) {
  parallel_for(n, elementwise_grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; i++) dinp[i] += inp[i] > T(0) ? dout[i] : T(0);
  });
}

// gelu(x) = x sigmoid(2u) = x / (1 + e^(-2u)), u = s (x + k x^3), s = sqrt(2/pi): the same
// function as 0.5 x (1 + tanh u), accurate in the negative tail too.
template <class T>
void gelu_forward(T* out, const T* inp, std::int64_t n) {
  const T s = std::sqrt(T(2) / std::numbers::pi_v<T>), k = T(gelu_k);
  parallel_for(n, elementwise_grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; i++) {
      const T x = inp[i];
      out[i] = x / (T(1) + fast_exp(T(-2) * s * (x + k * x * x * x)));
    }
  });
}

// gelu'(x) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx, du/dx = s (1 + 3k x^2). With
// e = e^(-2|u|) in (0, 1]: tanh u = sign(u) (1 - e) / (1 + e), sech^2 u = 4 e / (1 + e)^2,
// which never overflow and keep their relative accuracy where tanh saturates.
namespace {

template <class T>
T gelu_grad(T dout, T x) {
  const T s = std::sqrt(T(2) / std::numbers::pi_v<T>), k = T(gelu_k);
  const T u = s * (x + k * x * x * x);
  const T e = fast_exp(T(-2) * std::fabs(u));
  const T r = T(1) / (T(1) + e);
  const T tanh_u = std::copysign((T(1) - e) * r, u);
  const T sech2_u = T(4) * e * r * r;
  const T du = s * (T(1) + T(3) * k * x * x);
  return dout * (T(0.5) * (T(1) + tanh_u) + T(0.5) * x * sech2_u * du);
}

}  // namespace

// Two loops, not one with a choice inside: a choice per element stops gcc vectorising it.
// overwrite adds to +0 so that its bits are accumulate's into zeros.
template <class T>
void gelu_backward(T* dinp, const T* dout, const T* inp, std::int64_t n, grad_into into) {
  parallel_for(n, elementwise_grain, [&](std::int64_t lo, std::int64_t hi) {
    if (into == grad_into::overwrite)
      for (std::int64_t i = lo; i < hi; i++) dinp[i] = T(0) + gelu_grad(dout[i], inp[i]);
    else
      for (std::int64_t i = lo; i < hi; i++) dinp[i] += gelu_grad(dout[i], inp[i]);
  });
}

// Counted per element: ReLU 1 FLOP (the compare); GELU 9 (the cubic, the scalings, the final
// product) with tanh counted as one.
layer_cost relu_cost(std::int64_t elements, int elem_bytes) {
  return {0, elements * elem_bytes, elements * elem_bytes, elements};
}
layer_cost gelu_cost(std::int64_t elements, int elem_bytes) {
  return {0, elements * elem_bytes, elements * elem_bytes, 9 * elements};
}

#define PIPEWORKS_ACTIVATION(T)                                         \
  template void relu_forward<T>(T*, const T*, std::int64_t);            \
  template void relu_backward<T>(T*, const T*, const T*, std::int64_t); \
  template void gelu_forward<T>(T*, const T*, std::int64_t);            \
  template void gelu_backward<T>(T*, const T*, const T*, std::int64_t, grad_into);
PIPEWORKS_ACTIVATION(float)
PIPEWORKS_ACTIVATION(double)
#undef PIPEWORKS_ACTIVATION

}  // namespace pipeworks
