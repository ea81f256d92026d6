// The linear layer on the GPU (fp32 data) through cuBLAS: ops/layers/linear.hpp's contract (both
// weight layouts), device pointers. `blas` is a cublasHandle_t bound to the caller's stream and
// says how the products run: strict fp32, TF32, or bf16 operands with fp32 accumulation.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/cuda/gemm_lt_cuda.hpp"

#include "ops/device/gpu_math.hpp"
#include "ops/layers/linear.hpp"

namespace pipeworks {
class caching_allocator;
}

namespace pipeworks::cuda {

// A cuBLAS handle on a stream (a cudaStream_t; null: the default stream). math: tf32 lets the
// GEMMs use TF32 tensor cores (faster, about 1e-3 relative error) instead of strict fp32; bf16
// makes the linear layers multiply bf16 copies of their operands (fp32 accumulation and output),
// in scratch from `memory` (the rank's caching allocator; null: cudaMallocAsync), and the other
// GEMMs (attention's) TF32.
class blas_handle {
 public:
  explicit blas_handle(void* stream = nullptr, gpu_math math = gpu_math::fp32,
                       caching_allocator* memory = nullptr);
  ~blas_handle();
  blas_handle(const blas_handle&) = delete;
  blas_handle& operator=(const blas_handle&) = delete;
  void* get() const { return handle_; }
  void* stream() const { return stream_; }
  bool tf32() const { return math_ != gpu_math::fp32; }  // tensor cores (TF32 at least)
  bool bf16() const { return math_ == gpu_math::bf16; }
  gpu_math math() const { return math_; }
  caching_allocator* memory() const { return memory_; }
  lt_matmul& lt() const { return *lt_; }  // cuBLASLt on the same stream (bias epilogues)

 private:
  void* handle_ = nullptr;
  void* stream_ = nullptr;
  gpu_math math_ = gpu_math::fp32;
  caching_allocator* memory_ = nullptr;
  std::unique_ptr<lt_matmul> lt_;
};

// out (N, OC) = inp (N, C) · W + bias; weight (C, OC) in_out or (OC, C) out_in; bias or nullptr.
void linear_forward(const blas_handle& blas, float* out, const float* inp, const float* weight,
                    const float* bias, std::int64_t N, int C, int OC, weight_layout layout);
// dpre (N, C) = (dout (N, OC) · W^T) ⊙ GELU'(pre), written whole: the input gradient of a linear
// layer whose input was GELU(pre), in one GEMM (cuBLASLt's DGELU epilogue). False, with nothing
// written, when cuBLASLt cannot (the caller runs linear_backward and gelu_backward).
bool linear_backward_gelu(const blas_handle& blas, float* dpre, const float* dout,
                          const float* weight, const float* pre, std::int64_t N, int C, int OC,
                          weight_layout layout);
// dinp (N, C) +=, dweight +=, dbias (OC) +=; any of them may be nullptr to skip it.
void linear_backward(const blas_handle& blas, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, std::int64_t N,
                     int C, int OC, weight_layout layout);

}  // namespace pipeworks::cuda
