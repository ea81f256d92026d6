// Linear layers as cuBLAS GEMMs on row-major data: a row-major (R, K) matrix is a column-major
// (K, R) one, so each product is written for the transposes (out^T = W^T inp^T, ...). The bias
// is broadcast by a kernel; its gradient is a column sum (column_sums_into: chunks of rows, then
// the chunks, in a fixed order).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "ops/cuda/cublas_check.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/elementwise_cuda.hpp"
#include "ops/cuda/linear_cuda.hpp"

namespace pipeworks::cuda {
namespace {

__global__ void add_bias_kernel(float* out, const float* bias, std::int64_t N, int OC) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < N * OC) out[i] += bias[i % OC];
}

}  // namespace

blas_handle::blas_handle(void* stream, bool tf32) : stream_(stream), tf32_(tf32) {
  cublasHandle_t h = nullptr;
  PW_CUBLAS(cublasCreate(&h));
  handle_ = h;
  PW_CUBLAS(cublasSetStream(h, static_cast<cudaStream_t>(stream)));
  PW_CUBLAS(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

blas_handle::~blas_handle() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void linear_forward(const blas_handle& blas, float* out, const float* inp, const float* weight,
                    const float* bias, std::int64_t N, int C, int OC, weight_layout layout) {
  if (N == 0) return;
  const float one = 1.f, zero = 0.f;
  const int n = static_cast<int>(N);
  // out^T (OC, N) = W' (OC, C) · inp^T (C, N), W' = W^T for in_out (stored (OC, C) column-major).
  if (layout == weight_layout::in_out)
    PW_CUBLAS(cublasSgemm(handle_of(blas), CUBLAS_OP_N, CUBLAS_OP_N, OC, n, C, &one, weight, OC,
                          inp, C, &zero, out, OC));
  else
    PW_CUBLAS(cublasSgemm(handle_of(blas), CUBLAS_OP_T, CUBLAS_OP_N, OC, n, C, &one, weight, C,
                          inp, C, &zero, out, OC));
  if (bias) {
    const std::int64_t total = N * OC;
    add_bias_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0,
                      static_cast<cudaStream_t>(blas.stream())>>>(out, bias, N, OC);
    PW_CUDA(cudaGetLastError());
  }
}

void linear_backward(const blas_handle& blas, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, std::int64_t N,
                     int C, int OC, weight_layout layout) {
  if (N == 0) return;
  const float one = 1.f;
  const int n = static_cast<int>(N);
  const cublasHandle_t h = handle_of(blas);
  const bool in_out = layout == weight_layout::in_out;
  if (dinp) {  // dinp^T (C, N) += W'^T (C, OC) · dout^T (OC, N)
    if (in_out)
      PW_CUBLAS(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, C, n, OC, &one, weight, OC, dout, OC,
                            &one, dinp, C));
    else
      PW_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, n, OC, &one, weight, C, dout, OC,
                            &one, dinp, C));
  }
  if (dweight) {
    if (in_out)  // dW (C, OC) row-major: dW^T (OC, C) += dout^T (OC, N) · inp (N, C)
      PW_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, OC, C, n, &one, dout, OC, inp, C, &one,
                            dweight, OC));
    else  // dW (OC, C) row-major: dW^T (C, OC) += inp^T (C, N) · dout (N, OC)
      PW_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, n, &one, inp, C, dout, OC, &one,
                            dweight, C));
  }
  if (dbias) {
    column_sums_into(dbias, dout, N, OC, blas.stream());
  }
}

}  // namespace pipeworks::cuda
