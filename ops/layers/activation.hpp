// Elementwise activations: ReLU and GELU (tanh approximation), parallel over n elements.
#pragma once
#include <cstdint>

#include "ops/layers/grad_into.hpp"
#include "ops/layers/layer_cost.hpp"

namespace pipeworks {

template <class T> void relu_forward(T* out, const T* inp, std::int64_t n);
// dinp += dout * (inp > 0)
template <class T> void relu_backward(T* dinp, const T* dout, const T* inp, std::int64_t n);

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T> void gelu_forward(T* out, const T* inp, std::int64_t n);
// dinp += dout * gelu'(inp), or = with grad_into::overwrite
template <class T>
void gelu_backward(T* dinp, const T* dout, const T* inp, std::int64_t n,
                   grad_into into = grad_into::accumulate);

// elements per sample; saved: the input.
layer_cost relu_cost(std::int64_t elements, int elem_bytes);
layer_cost gelu_cost(std::int64_t elements, int elem_bytes);

}  // namespace pipeworks
