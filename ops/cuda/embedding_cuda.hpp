// Token plus position embedding on the GPU (fp32): ops/layers/embedding.hpp's contract, device
// pointers, on `stream` (a cudaStream_t; null: the default stream).
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// out (B, T, C) = wte[tokens] + wpe[t]; tokens (B, T) in [0, V) (the caller checks them).
void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       int B, int Tn, int C, void* stream = nullptr);
// dwte (V, C) +=, dwpe (maxT, C) +=; dout (B, T, C). Deterministic: positions in order, no atomics.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        int B, int Tn, int C, int V, void* stream = nullptr);

}  // namespace pipeworks::cuda
