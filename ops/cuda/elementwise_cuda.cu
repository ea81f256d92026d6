// Element-wise kernels (grid-stride, one element per step) and a deterministic sum of squares.
#include <cuda_runtime.h>

#include <vector>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/elementwise_cuda.hpp"

namespace pipeworks::cuda {
namespace {

constexpr int threads = 256;
constexpr int square_blocks = 264;  // twice an H100's multiprocessors: a fixed grid, fixed order

unsigned blocks(std::int64_t n) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 8 ? b : 65535 * 8);
}

__global__ void add_kernel(float* out, const float* a, const float* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void add_into_kernel(float* dst, const float* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] += src[i];
}

__global__ void scale_kernel(float* x, float f, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] *= f;
}

// Each block sums its grid-stride elements' squares in double, then a fixed tree in shared
// memory: partial[blockIdx.x].
__global__ void squares_kernel(double* partial, const float* x, std::int64_t n) {
  __shared__ double s[threads];
  double acc = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = threads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

}  // namespace

void add(float* out, const float* a, const float* b, std::int64_t n, void* stream) {
  if (n == 0) return;
  add_kernel<<<blocks(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(out, a, b, n);
  PW_CUDA(cudaGetLastError());
}

void add_into(float* dst, const float* src, std::int64_t n, void* stream) {
  if (n == 0) return;
  add_into_kernel<<<blocks(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(dst, src, n);
  PW_CUDA(cudaGetLastError());
}

void scale(float* x, float f, std::int64_t n, void* stream) {
  if (n == 0) return;
  scale_kernel<<<blocks(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(x, f, n);
  PW_CUDA(cudaGetLastError());
}

double sum_of_squares(const float* x, std::int64_t n, void* stream) {
  if (n == 0) return 0;
  const auto s = static_cast<cudaStream_t>(stream);
  double* partial = nullptr;
  PW_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&partial), square_blocks * sizeof(double), s));
  squares_kernel<<<square_blocks, threads, 0, s>>>(partial, x, n);
  PW_CUDA(cudaGetLastError());
  std::vector<double> host(square_blocks);
  PW_CUDA(cudaMemcpyAsync(host.data(), partial, square_blocks * sizeof(double),
                          cudaMemcpyDeviceToHost, s));
  PW_CUDA(cudaFreeAsync(partial, s));
  PW_CUDA(cudaStreamSynchronize(s));
  double sum = 0;
  for (double p : host) sum += p;
  return sum;
}

}  // namespace pipeworks::cuda
