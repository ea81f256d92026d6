// gpu_resources and open_gpu on the CUDA runtime.
#include "ops/cuda/gpu_resources.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "base/result.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_memory.hpp"

namespace pipeworks {

gpu_resources::gpu_resources(int index, gpu_math math) : index_(index) {
  PW_CUDA(cudaSetDevice(index));
  cudaStream_t s = nullptr;
  PW_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
  memory_ = std::make_shared<caching_allocator>(cuda::device_memory(index));
  blas_ = std::make_unique<cuda::blas_handle>(stream_, math, memory_.get());
}

gpu_resources::~gpu_resources() {
  cudaSetDevice(index_);
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  blas_.reset();
  memory_.reset();
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void gpu_resources::synchronize() const {
  PW_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
}

void gpu_resources::make_current() const {
  int current = -1;
  PW_CUDA(cudaGetDevice(&current));
  if (current != index_) PW_CUDA(cudaSetDevice(index_));
}

std::shared_ptr<gpu_resources> open_gpu(int index, gpu_math math) {
  const gpu_census gpus = find_gpus();
  const std::string name = "cuda:" + std::to_string(index);
  if (gpus.count == 0) throw pipeworks_error(name + " cannot be used: " + gpus.why + "; run with --device cpu");
  if (index < 0 || index >= gpus.count)
    throw pipeworks_error(name + " does not exist: this machine has " + std::to_string(gpus.count) +
                          (gpus.count == 1 ? " GPU (" : " GPUs (") + gpus.names + "), cuda:0.." +
                          "cuda:" + std::to_string(gpus.count - 1));
  return std::make_shared<gpu_resources>(index, math);
}

}  // namespace pipeworks
