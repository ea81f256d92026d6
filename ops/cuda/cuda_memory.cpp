// device_memory and pinned_buffer on the CUDA runtime.
#include "ops/cuda/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "ops/device/device_memory.hpp"

#include "ops/cuda/cuda_check.hpp"

namespace pipeworks::cuda {

caching_allocator::raw_allocator device_memory(int device) {
  return {[device](std::size_t n) -> void* {
            PW_CUDA(cudaSetDevice(device));
            void* p = nullptr;
            const cudaError_t e = cudaMalloc(&p, n);
            if (e == cudaErrorMemoryAllocation) {
              (void)cudaGetLastError();  // not sticky: clear it, the allocator retries or reports
              return nullptr;
            }
            PW_CUDA(e);
            return p;
          },
          [device](void* p) {
            cudaSetDevice(device);
            cudaFree(p);
          },
          "cuda:" + std::to_string(device)};
}

}  // namespace pipeworks::cuda

namespace pipeworks {

void copy_bytes(void* dst, const device& to, const void* src, const device& from, std::size_t n,
                void* stream) {
  if (n == 0) return;
  if (to.kind == device_kind::cpu && from.kind == device_kind::cpu) {
    std::memcpy(dst, src, n);
    return;
  }
  // Unified addressing tells the direction from the pointers; the GPU's own device is made current.
  PW_CUDA(cudaSetDevice(to.kind == device_kind::cuda ? to.index : from.index));
  const auto s = static_cast<cudaStream_t>(stream);
  PW_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
  if (stream == nullptr) PW_CUDA(cudaStreamSynchronize(s));
}

void zero_bytes(void* p, const device& on, std::size_t n, void* stream) {
  if (n == 0) return;
  if (on.kind == device_kind::cpu) {
    std::memset(p, 0, n);
    return;
  }
  PW_CUDA(cudaSetDevice(on.index));
  const auto s = static_cast<cudaStream_t>(stream);
  PW_CUDA(cudaMemsetAsync(p, 0, n, s));
  if (stream == nullptr) PW_CUDA(cudaStreamSynchronize(s));
}

void wait_stream(const device& on, void* stream) {
  if (on.kind == device_kind::cpu) return;
  PW_CUDA(cudaSetDevice(on.index));
  PW_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace pipeworks

namespace pipeworks::cuda {

pinned_buffer::pinned_buffer(std::size_t bytes) : n_(bytes) {
  PW_CUDA(cudaMallocHost(&p_, bytes == 0 ? 1 : bytes));
}

pinned_buffer::~pinned_buffer() {
  if (p_) cudaFreeHost(p_);
}

}  // namespace pipeworks::cuda
