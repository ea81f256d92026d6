// A GPU rank's resources: the GPU's number, a non-blocking stream of its own, a caching allocator
// of that GPU's memory and a cuBLAS handle on the stream. Made by open_gpu (ops/device/device.hpp)
// and owned by the rank's device context.
#pragma once
#include "ops/cuda/linear_cuda.hpp"
#include "ops/device/caching_allocator.hpp"
#include "ops/device/device.hpp"

namespace pipeworks {

class gpu_resources {
 public:
  // math: how the matrix products run (strict fp32, TF32 or bf16; ops/device/device.hpp).
  gpu_resources(int index, gpu_math math);
  ~gpu_resources();
  gpu_resources(const gpu_resources&) = delete;
  gpu_resources& operator=(const gpu_resources&) = delete;

  int index() const { return index_; }
  void* stream() const { return stream_; }  // a cudaStream_t
  // Shared: tensors made from it keep it alive.
  const std::shared_ptr<caching_allocator>& memory() const { return memory_; }
  const cuda::blas_handle& blas() const { return *blas_; }
  void synchronize() const;  // waits for the stream's work
  // Makes this GPU the calling thread's current device (a kernel or cuBLAS call on its stream
  // needs it; ranks of one process on different GPUs share the actor system's threads).
  void make_current() const;

 private:
  int index_;
  void* stream_ = nullptr;
  std::shared_ptr<caching_allocator> memory_;
  std::unique_ptr<cuda::blas_handle> blas_;
};

}  // namespace pipeworks
