// GELU (the tanh form, GPT-2's) and ReLU on the GPU (fp32): ops/layers/activation.hpp's contract,
// device pointers, on `stream` (a cudaStream_t; null: the default stream).
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

void gelu_forward(float* out, const float* inp, std::int64_t n, void* stream = nullptr);
// dinp (n) += dout * gelu'(inp).
void gelu_backward(float* dinp, const float* dout, const float* inp, std::int64_t n,
                   void* stream = nullptr);

void relu_forward(float* out, const float* inp, std::int64_t n, void* stream = nullptr);
// dinp (n) += inp > 0 ? dout : 0.
void relu_backward(float* dinp, const float* dout, const float* inp, std::int64_t n,
                   void* stream = nullptr);

}  // namespace pipeworks::cuda
