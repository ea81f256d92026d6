// device_memory and pinned_buffer on the CUDA runtime.
#include "ops/cuda/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <string>

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

pinned_buffer::pinned_buffer(std::size_t bytes) : n_(bytes) {
  PW_CUDA(cudaMallocHost(&p_, bytes == 0 ? 1 : bytes));
}

pinned_buffer::~pinned_buffer() {
  if (p_) cudaFreeHost(p_);
}

}  // namespace pipeworks::cuda
