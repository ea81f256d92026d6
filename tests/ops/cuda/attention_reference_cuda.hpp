// Causal attention on the GPU (fp32), the simple version that materialises the T x T
// probabilities as the CPU does (ops/layers/attention.hpp's contract): the tests' reference for
// the flash kernels, built with the tests only. Device pointers, on `stream` (null: the default).
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// out (B, T, C); att (B, NH, T, T) probabilities saved for backward (0 above the diagonal);
// qkv (B, T, 3C).
void attention_forward(float* out, float* att, const float* qkv, int B, int Tn, int C, int NH,
                       void* stream = nullptr);
// dqkv (B, T, 3C) +=; dout (B, T, C); scratch: B*NH*T*T floats of device memory.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int Tn, int C, int NH, void* stream = nullptr);

}  // namespace pipeworks::cuda
