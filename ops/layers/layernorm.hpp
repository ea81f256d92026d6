// Layer normalisation over the last dimension C, eps 1e-5, with affine weight and bias.
#pragma once
#include <cstdint>

#include "ops/layers/layer_cost.hpp"

namespace pipeworks {

inline constexpr double layernorm_eps = 1e-5;

// out (N, C); mean, rstd (N) saved for backward; inp (N, C); weight, bias (C).
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       std::int64_t N, int C);

// dinp (N, C) +=, dweight (C) +=, dbias (C) +=; dout (N, C).
template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                        const T* weight, const T* mean, const T* rstd, std::int64_t N, int C);

// positions per sample; saved: the input plus mean and rstd.
layer_cost layernorm_cost(std::int64_t positions, int C, int elem_bytes);

}  // namespace pipeworks
