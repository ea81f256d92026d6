// Causal multi-head self-attention on the GPU (fp32) on cuBLAS: the scores, the weighted values
// and every gradient are strided-batched GEMMs over the heads (tensor cores under TF32), with a
// masked softmax kernel between them. ops/layers/attention.hpp's contract, the same as the simple
// kernels of tests/ops/cuda/attention_reference_cuda.hpp (the tests' reference). Device pointers;
// `blas` is a cuBLAS handle on the caller's stream.
#pragma once
#include "ops/cuda/linear_cuda.hpp"

namespace pipeworks::cuda {

// out (B, T, C); att (B, NH, T, T) probabilities saved for backward (0 above the diagonal);
// qkv (B, T, 3C).
void attention_forward(const blas_handle& blas, float* out, float* att, const float* qkv, int B,
                       int Tn, int C, int NH);
// dqkv (B, T, 3C) +=; dout (B, T, C); scratch: B*NH*T*T floats of device memory.
void attention_backward(const blas_handle& blas, float* dqkv, float* scratch, const float* dout,
                        const float* qkv, const float* att, int B, int Tn, int C, int NH);

}  // namespace pipeworks::cuda
