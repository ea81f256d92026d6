// Causal multi-head self-attention on TF32 tensor cores that never materialises the T x T
// probabilities (FlashAttention-2's tiling): forward saves each row's logsumexp, backward recomputes.
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// Whether these kernels take `heads` (batch x heads, at most 65535) of `head_size` on the current
// GPU (16, 32, 64 or 128 wide, and the shared memory the size needs); otherwise use
// attention_gemm_cuda.hpp.
bool flash_attention_supported(int head_size, std::int64_t heads);

// Which kernels: the fastest for the head size (the register-resident ones of
// attention_mma_cuda.hpp for heads 32 and 64 wide, else the WMMA ones here), or the WMMA ones.
enum class flash_kernels { fastest, wmma };

// out (B, T, C); lse (B, NH, T): each query row's logsumexp of its scaled scores; qkv (B, T, 3C).
void flash_attention_forward(void* stream, float* out, float* lse, const float* qkv, int B, int Tn,
                             int C, int NH, flash_kernels kernels = flash_kernels::fastest);
// dqkv (B, T, 3C) +=; dout and out (B, T, C); lse from the forward; delta: B*NH*T floats of
// scratch. Deterministic: every element of dqkv is summed by one thread in a fixed order.
void flash_attention_backward(void* stream, float* dqkv, float* delta, const float* dout,
                              const float* out, const float* qkv, const float* lse, int B, int Tn,
                              int C, int NH, flash_kernels kernels = flash_kernels::fastest);

}  // namespace pipeworks::cuda
