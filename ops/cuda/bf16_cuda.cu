// The fp32 -> bf16 conversion kernel (four values a thread where aligned) and bf16 scratch.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ops/cuda/bf16_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/device/caching_allocator.hpp"

namespace pipeworks::cuda {
namespace {

__global__ void to_bf16_kernel(__nv_bfloat16* dst, const float* src, std::int64_t n) {
  const std::int64_t quads = n / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  for (std::int64_t q = i; q < quads; q += stride) {
    const float4 v = reinterpret_cast<const float4*>(src)[q];
    __nv_bfloat162* d = reinterpret_cast<__nv_bfloat162*>(dst + 4 * q);
    d[0] = __floats2bfloat162_rn(v.x, v.y);
    d[1] = __floats2bfloat162_rn(v.z, v.w);
  }
  for (std::int64_t j = 4 * quads + i; j < n; j += stride) dst[j] = __float2bfloat16_rn(src[j]);
}

__global__ void to_bf16_scalar_kernel(__nv_bfloat16* dst, const float* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

}  // namespace

void to_bf16(void* dst, const float* src, std::int64_t n, void* stream) {
  if (n <= 0) return;
  constexpr int threads = 256;
  const std::int64_t want = (n / 4 + threads - 1) / threads + 1;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
  const auto s = static_cast<cudaStream_t>(stream);
  auto* d = static_cast<__nv_bfloat16*>(dst);
  // float4 loads and bfloat162 stores need 16- and 4-byte alignment (allocations give 256).
  if (reinterpret_cast<std::uintptr_t>(src) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 8 == 0)
    to_bf16_kernel<<<blocks, threads, 0, s>>>(d, src, n);
  else
    to_bf16_scalar_kernel<<<blocks, threads, 0, s>>>(d, src, n);
  PW_CUDA(cudaGetLastError());
}

gpu_scratch::gpu_scratch(caching_allocator* memory, std::size_t bytes, void* stream)
    : memory_(memory), stream_(stream) {
  if (bytes == 0) bytes = 1;
  if (memory_) p_ = memory_->allocate(bytes);
  else PW_CUDA(cudaMallocAsync(&p_, bytes, static_cast<cudaStream_t>(stream_)));
}

gpu_scratch::~gpu_scratch() {
  try {
    if (memory_) memory_->deallocate(p_);
    else cudaFreeAsync(p_, static_cast<cudaStream_t>(stream_));
  } catch (...) {  // (deallocate refuses only a pointer it never gave out)
  }
}

}  // namespace pipeworks::cuda
