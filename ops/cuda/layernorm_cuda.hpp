// Layer normalisation on the GPU (fp32): the same contract as ops/layers/layernorm.hpp, device
// pointers, on `stream` (a cudaStream_t; null: the default stream).
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// out (N, C); mean, rstd (N) saved for backward; inp (N, C); weight, bias (C).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, int C, void* stream = nullptr);
// dinp (N, C) +=, dweight (C) +=, dbias (C) +=; dout (N, C). Deterministic: no atomics.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::int64_t N, int C, void* stream = nullptr);

}  // namespace pipeworks::cuda
