// FlashAttention-2's causal attention with its tiles in registers: mma.sync (m16n8k8, TF32) on
// fragments held by each thread, the online softmax on the accumulators. Heads 32 or 64 wide.
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// Whether these kernels take heads of `head_size` (32 or 64).
bool mma_attention_supported(int head_size);

// As flash_attention_forward (attention_flash_cuda.hpp): out (B, T, C), lse (B, NH, T), qkv
// (B, T, 3C).
void mma_attention_forward(void* stream, float* out, float* lse, const float* qkv, int B, int Tn,
                           int C, int NH);
// dqkv (B, T, 3C) +=, from dout (B, T, C), lse and delta (B, NH, T: each row's dout . out).
// Deterministic: dK and dV per key tile, dQ per query tile, each summed in a fixed order.
void mma_attention_backward(void* stream, float* dqkv, const float* delta, const float* dout,
                            const float* qkv, const float* lse, int B, int Tn, int C, int NH);

}  // namespace pipeworks::cuda
