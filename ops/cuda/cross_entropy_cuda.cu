// Softmax cross-entropy kernels: a warp per row (max, sum of exponentials, probabilities, the
// row's loss); a bad target marks its row's loss NaN and the host names the first such row.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/cuda/cross_entropy_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/warp_reduce.cuh"

namespace pipeworks::cuda {
namespace {

__global__ void forward_kernel(float* probs, float* row_loss, const float* logits,
                               const std::int32_t* targets, std::int64_t N, int V) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(blockDim.y) + threadIdx.y;
  if (row >= N) return;
  const int lane = threadIdx.x;
  const float* x = logits + row * V;
  const float lse = warp_softmax(probs + row * V, x, V, lane);
  if (lane == 0) {
    const std::int32_t t = targets[row];
    row_loss[row] = (t < 0 || t >= V) ? NAN : lse - x[t];
  }
}

__global__ void backward_kernel(float* dlogits, const float* probs, const std::int32_t* targets,
                                float g, std::int64_t N, int V) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * V) return;
  const std::int64_t row = i / V;
  const int col = static_cast<int>(i % V);
  dlogits[i] += probs[i] * g - (col == targets[row] ? g : 0.f);
}

}  // namespace

float cross_entropy_forward(float* probs, float* row_loss, const float* logits,
                            const std::int32_t* targets, std::int64_t N, int V, void* stream) {
  if (N == 0) return 0.f;
  const auto s = static_cast<cudaStream_t>(stream);
  forward_kernel<<<static_cast<unsigned>((N + 7) / 8), dim3(32, 8), 0, s>>>(probs, row_loss, logits,
                                                                          targets, N, V);
  PW_CUDA(cudaGetLastError());
  std::vector<float> rows(static_cast<std::size_t>(N));
  PW_CUDA(cudaMemcpyAsync(rows.data(), row_loss, rows.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, s));
  PW_CUDA(cudaStreamSynchronize(s));
  double total = 0;
  for (std::size_t n = 0; n < rows.size(); ++n) {
    if (std::isnan(rows[n]))
      fail_message("cross_entropy: the target at position " + std::to_string(n) +
                   " is outside [0, " + std::to_string(V) + ")");
    total += rows[n];
  }
  return static_cast<float>(total / static_cast<double>(N));
}

void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                            float dloss, std::int64_t N, int V, void* stream) {
  if (N == 0) return;
  const std::int64_t n = N * V;
  const float g = dloss / static_cast<float>(N);
  backward_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      dlogits, probs, targets, g, N, V);
  PW_CUDA(cudaGetLastError());
}

}  // namespace pipeworks::cuda
