// Token plus position embedding: out[b, t] = wte[tokens[b, t]] + wpe[t].
#pragma once
#include <cstdint>

#include "ops/layers/layer_cost.hpp"

namespace pipeworks {

// out (B, T, C); tokens (B, T) in [0, V); wte (V, C); wpe (maxT, C) with T <= maxT.
template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B,
                       int Tn, int C);

// dwte (V, C) +=, dwpe (maxT, C) +=; dout (B, T, C).
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn,
                        int C);

// saved: the token ids.
layer_cost embedding_cost(int Tn, int V, int maxT, int C, int elem_bytes);

}  // namespace pipeworks
