// Launching an attention kernel over (tiles, heads) blocks with the dynamic shared memory it asks
// for (past the default 48 KB, so the attribute is set first). Shared by the flash kernels' files.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "ops/cuda/cuda_check.hpp"

namespace pipeworks::cuda {

// k over a (tiles, heads) grid of `threads`-thread blocks, `words` 4-byte words of dynamic shared
// memory each, on `stream` (a cudaStream_t).
template <class Kernel, class... Args>
void launch_tiles(Kernel k, std::size_t words, int tiles, int heads, int threads, void* stream,
                  Args... args) {
  const std::size_t bytes = words * 4;
  PW_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes)));
  k<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(heads)),
      static_cast<unsigned>(threads), bytes, static_cast<cudaStream_t>(stream)>>>(args...);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
