// Device memory for the caching allocator (cudaMalloc / cudaFree on one GPU) and pinned host
// buffers for explicit copies between the CPU and a GPU (cudaMemcpyAsync needs them to overlap).
#pragma once
#include <cstddef>

#include "ops/device/caching_allocator.hpp"

namespace pipeworks::cuda {

// cudaMalloc on GPU `device` (nullptr when it is full); cudaFree.
caching_allocator::raw_allocator device_memory(int device);

// Page-locked host memory of a fixed size, freed with it.
class pinned_buffer {
 public:
  explicit pinned_buffer(std::size_t bytes);
  ~pinned_buffer();
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  void* data() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace pipeworks::cuda
