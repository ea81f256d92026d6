// The linear layer on the GPU (fp32) through cuBLAS: ops/layers/linear.hpp's contract (both
// weight layouts), device pointers. `blas` is a cublasHandle_t bound to the caller's stream.
#pragma once
#include <cstdint>

#include "ops/layers/linear.hpp"

namespace pipeworks::cuda {

// A cuBLAS handle on a stream (a cudaStream_t; null: the default stream); tf32 lets the GEMMs
// use TF32 tensor cores (faster, about 1e-3 relative error) instead of strict fp32.
class blas_handle {
 public:
  explicit blas_handle(void* stream = nullptr, bool tf32 = false);
  ~blas_handle();
  blas_handle(const blas_handle&) = delete;
  blas_handle& operator=(const blas_handle&) = delete;
  void* get() const { return handle_; }
  void* stream() const { return stream_; }
  bool tf32() const { return tf32_; }

 private:
  void* handle_ = nullptr;
  void* stream_ = nullptr;
  bool tf32_ = false;
};

// out (N, OC) = inp (N, C) · W + bias; weight (C, OC) in_out or (OC, C) out_in; bias or nullptr.
void linear_forward(const blas_handle& blas, float* out, const float* inp, const float* weight,
                    const float* bias, std::int64_t N, int C, int OC, weight_layout layout);
// dinp (N, C) +=, dweight +=, dbias (OC) +=; any of them may be nullptr to skip it.
void linear_backward(const blas_handle& blas, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, std::int64_t N,
                     int C, int OC, weight_layout layout);

}  // namespace pipeworks::cuda
