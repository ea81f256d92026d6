// Embedding kernels: the forward a thread per output element; the backward a thread per channel
// for the token table (walking the positions in order, so repeated tokens add in a fixed order)
// and a thread per (position, channel) for the position table.
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/embedding_cuda.hpp"

namespace pipeworks::cuda {
namespace {

__global__ void forward_kernel(float* out, const std::int32_t* tokens, const float* wte,
                               const float* wpe, int B, int T, int C) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::int64_t>(B) * T * C) return;
  const std::int64_t n = i / C;
  const int c = static_cast<int>(i % C), t = static_cast<int>(n % T);
  out[i] = wte[static_cast<std::int64_t>(tokens[n]) * C + c] + wpe[static_cast<std::int64_t>(t) * C + c];
}

// dwte[v, c] += the sum of dout[n, c] over the positions n holding token v, in position order:
// a block per (32 columns, token v), the token ids staged through shared memory.
__global__ void token_grad_kernel(float* dwte, const float* dout, const std::int32_t* tokens,
                                  std::int64_t positions, int C) {
  __shared__ std::int32_t ids[1024];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int v = blockIdx.y;
  float acc = 0.f;
  for (std::int64_t base = 0; base < positions; base += 1024) {
    const int n = positions - base < 1024 ? static_cast<int>(positions - base) : 1024;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += 32) ids[i] = tokens[base + i];
    __syncthreads();
    if (c < C)
      for (int i = 0; i < n; ++i)
        if (ids[i] == v) acc += dout[(base + i) * C + c];
  }
  if (c < C) dwte[static_cast<std::int64_t>(v) * C + c] += acc;
}

__global__ void position_grad_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::int64_t>(T) * C) return;
  float s = 0.f;
  for (int b = 0; b < B; ++b) s += dout[static_cast<std::int64_t>(b) * T * C + i];
  dwpe[i] += s;
}

}  // namespace

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       int B, int Tn, int C, void* stream) {
  const std::int64_t n = static_cast<std::int64_t>(B) * Tn * C;
  if (n == 0) return;
  forward_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      out, tokens, wte, wpe, B, Tn, C);
  PW_CUDA(cudaGetLastError());
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        int B, int Tn, int C, int V, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (static_cast<std::int64_t>(B) * Tn * C == 0) return;
  token_grad_kernel<<<dim3(static_cast<unsigned>((C + 31) / 32), static_cast<unsigned>(V)), 32, 0,
                      s>>>(dwte, dout, tokens, static_cast<std::int64_t>(B) * Tn, C);
  PW_CUDA(cudaGetLastError());
  const std::int64_t tc = static_cast<std::int64_t>(Tn) * C;
  position_grad_kernel<<<static_cast<unsigned>((tc + 255) / 256), 256, 0, s>>>(dwpe, dout, B, Tn, C);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
