// Test helper for CPU-against-CUDA op tests: skip where there is no GPU (saying why), device
// buffers that upload and download std::vectors, and the normalised error of two results.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/device/device.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/cuda_check.hpp"
#endif

namespace pipeworks::cuda_test {

// True when a GPU is there; otherwise warns with the reason (the test then returns: skipped).
inline bool have_gpu() {
  const gpu_census gpus = find_gpus();
  if (gpus.count == 0) WARN("skipped: " << gpus.why);
  return gpus.count > 0;
}

// True when at least n GPUs are there; otherwise warns with how many there are.
inline bool have_gpus(int n) {
  const gpu_census gpus = find_gpus();
  if (gpus.count < n)
    WARN("skipped: needs " << n << " GPUs, this machine has "
                           << (gpus.count == 0 ? "none (" + gpus.why + ")" : std::to_string(gpus.count)));
  return gpus.count >= n;
}

// ||a - b|| / ||b|| over all elements (1 when b is zero and a is not).
template <class A, class B>
double normalised_error(const std::vector<A>& a, const std::vector<B>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
}

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

#ifdef PIPEWORKS_HAVE_CUDA
// A device copy of a vector, freed with it.
template <class T>
class gpu_buffer {
 public:
  explicit gpu_buffer(const std::vector<T>& host) : n_(host.size()) {
    PW_CUDA(cudaMalloc(&p_, std::max<std::size_t>(n_, 1) * sizeof(T)));
    PW_CUDA(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit gpu_buffer(std::size_t n) : gpu_buffer(std::vector<T>(n)) {}
  ~gpu_buffer() { cudaFree(p_); }
  gpu_buffer(const gpu_buffer&) = delete;
  gpu_buffer& operator=(const gpu_buffer&) = delete;
  T* get() const { return p_; }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    PW_CUDA(cudaDeviceSynchronize());
    PW_CUDA(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};
#endif

}  // namespace pipeworks::cuda_test
