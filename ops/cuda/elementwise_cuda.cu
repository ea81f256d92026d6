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

constexpr int chunk_rows = 256;  // rows per chunk of column_sums_into

// partial[chunk, c] = sum of x[n, c] over the chunk's rows: a block is 32 columns x 8 row lanes,
// each lane summing every 8th row of the chunk, then the 8 lanes in order.
__global__ void column_partial_kernel(float* partial, const float* x, std::int64_t N, int C) {
  __shared__ float s[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * chunk_rows;
  const std::int64_t end = begin + chunk_rows < N ? begin + chunk_rows : N;
  float acc = 0.f;
  if (c < C)
    for (std::int64_t n = begin + threadIdx.y; n < end; n += 8) acc += x[n * C + c];
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.f;
    for (int l = 0; l < 8; ++l) t += s[l][threadIdx.x];
    partial[static_cast<std::int64_t>(blockIdx.y) * C + c] = t;
  }
}

__global__ void column_finish_kernel(float* dst, const float* partial, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float t = 0.f;
  for (int k = 0; k < chunks; ++k) t += partial[static_cast<std::int64_t>(k) * C + c];
  dst[c] += t;
}

}  // namespace

void column_sums_into(float* dst, const float* x, std::int64_t N, int C, void* stream) {
  if (N == 0 || C == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const int chunks = static_cast<int>((N + chunk_rows - 1) / chunk_rows);
  float* partial = nullptr;
  PW_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&partial),
                          static_cast<std::size_t>(chunks) * C * sizeof(float), s));
  column_partial_kernel<<<dim3(static_cast<unsigned>((C + 31) / 32), static_cast<unsigned>(chunks)),
                          dim3(32, 8), 0, s>>>(partial, x, N, C);
  PW_CUDA(cudaGetLastError());
  column_finish_kernel<<<static_cast<unsigned>((C + 255) / 256), 256, 0, s>>>(dst, partial, chunks, C);
  PW_CUDA(cudaGetLastError());
  PW_CUDA(cudaFreeAsync(partial, s));
}

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
