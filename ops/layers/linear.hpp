// Linear layer: out = inp · W + b, over N rows. Weights come in two layouts: in_out is GPT-2's
// Conv1D (C, OC); out_in is PyTorch's nn.Linear (OC, C). Backward adds into its gradients.
#pragma once
#include <cstdint>

#include "ops/layers/grad_into.hpp"
#include "ops/layers/layer_cost.hpp"

namespace pipeworks {

enum class weight_layout { in_out, out_in };

// out (N, OC); inp (N, C); weight (C, OC) or (OC, C); bias (OC) or nullptr.
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, std::int64_t N, int C,
                    int OC, weight_layout layout);

// dinp (N, C) += (or = with grad_into::overwrite), dweight +=, dbias (OC) += (any may be
// nullptr to skip it); dout (N, OC).
template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     std::int64_t N, int C, int OC, weight_layout layout,
                     grad_into dinp_into = grad_into::accumulate);

// positions: rows per sample (T for a sequence model, 1 for an MLP). Saved: the input.
layer_cost linear_cost(std::int64_t positions, int C, int OC, bool bias, int elem_bytes);

}  // namespace pipeworks
