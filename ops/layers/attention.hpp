// Causal multi-head self-attention core (no projections), scale 1/sqrt(head_dim).
// B = batch, T = sequence length, C = channels, NH = heads, hs = C / NH. Within qkv's last
// dimension q, k and v come in that order, and head h is the slice [h*hs, (h+1)*hs) of each.
#pragma once
#include <cstdint>

#include "ops/layers/grad_into.hpp"
#include "ops/layers/layer_cost.hpp"

namespace pipeworks {

// out (B, T, C); att (B, NH, T, T) softmax probabilities saved for backward (entries above the
// diagonal are 0); qkv (B, T, 3C).
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);

// dqkv (B, T, 3C) += (or = with grad_into::overwrite: each head's task zeroes its own columns
// first, in parallel and just before it adds); dout (B, T, C); qkv and att as saved by the forward.
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int NH, grad_into into = grad_into::accumulate);

// saved: qkv and att; output: (T, C).
layer_cost attention_cost(int Tn, int C, int NH, int elem_bytes);

}  // namespace pipeworks
