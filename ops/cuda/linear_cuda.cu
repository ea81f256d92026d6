// Linear layers as cuBLAS GEMMs on row-major data: a row-major (R, K) matrix is a column-major
// (K, R) one, so each product is written for the transposes (out^T = W^T inp^T, ...). The bias
// is added in cuBLASLt's epilogue (or, where it has no algorithm, by a kernel); its gradient comes
// out of the weight gradient's GEMM (cuBLASLt's BGRAD epilogues), or, without a weight gradient or
// an algorithm, is a column sum (column_sums_into: chunks of rows, then the chunks, in a fixed
// order). With bf16 the operands are rounded to bf16 copies first and the
// products accumulate in fp32 into fp32 outputs.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <optional>
#include <string>

#include "ops/cuda/bf16_cuda.hpp"
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

blas_handle::blas_handle(void* stream, gpu_math math, caching_allocator* memory)
    : stream_(stream), math_(math), memory_(memory) {
  cublasHandle_t h = nullptr;
  PW_CUBLAS(cublasCreate(&h));
  handle_ = h;
  PW_CUBLAS(cublasSetStream(h, static_cast<cudaStream_t>(stream)));
  PW_CUBLAS(cublasSetMathMode(h, tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  lt_ = std::make_unique<lt_matmul>(stream, memory);
}

blas_handle::~blas_handle() {
  lt_.reset();
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

namespace {

// C (m, n) column-major = A' B' + beta C: fp32 operands (cublasSgemm), or bf16 ones (cublasGemmEx
// with fp32 accumulation and output) when bf16 is true.
void gemm(cublasHandle_t h, bool bf16, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
          int k, const void* A, int lda, const void* B, int ldb, float beta, float* C, int ldc) {
  const float one = 1.f;
  if (bf16)
    PW_CUBLAS(cublasGemmEx(h, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb,
                           &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else
    PW_CUBLAS(cublasSgemm(h, ta, tb, m, n, k, &one, static_cast<const float*>(A), lda,
                          static_cast<const float*>(B), ldb, &beta, C, ldc));
}

// x itself, or (bf16) a bf16 copy of it that lives as long as this does.
class operand {
 public:
  operand(const blas_handle& blas, const float* x, std::int64_t n) : p_(x) {
    if (blas.bf16() && x) {
      copy_.emplace(blas.memory(), x, n, blas.stream());
      p_ = copy_->get();
    }
  }
  const void* get() const { return p_; }

 private:
  const void* p_;
  std::optional<bf16_copy> copy_;
};

}  // namespace

void linear_forward(const blas_handle& blas, float* out, const float* inp, const float* weight,
                    const float* bias, std::int64_t N, int C, int OC, weight_layout layout) {
  if (N == 0) return;
  const int n = static_cast<int>(N);
  const operand w(blas, weight, static_cast<std::int64_t>(C) * OC), x(blas, inp, N * C);
  // out^T (OC, N) = W' (OC, C) · inp^T (C, N), W' = W^T for in_out (stored (OC, C) column-major).
  // With a bias, cuBLASLt adds it in the GEMM's epilogue where it has an algorithm for the shape.
  const bool in_out = layout == weight_layout::in_out;
  if (bias && blas.lt().gemm_bias(blas.math(), !in_out, OC, n, C, w.get(), in_out ? OC : C, x.get(),
                                  C, bias, out, OC))
    return;
  if (layout == weight_layout::in_out)
    gemm(handle_of(blas), blas.bf16(), CUBLAS_OP_N, CUBLAS_OP_N, OC, n, C, w.get(), OC, x.get(), C,
         0.f, out, OC);
  else
    gemm(handle_of(blas), blas.bf16(), CUBLAS_OP_T, CUBLAS_OP_N, OC, n, C, w.get(), C, x.get(), C,
         0.f, out, OC);
  if (bias) {
    const std::int64_t total = N * OC;
    add_bias_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0,
                      static_cast<cudaStream_t>(blas.stream())>>>(out, bias, N, OC);
    PW_CUDA(cudaGetLastError());
  }
}

bool linear_backward_gelu(const blas_handle& blas, float* dpre, const float* dout,
                          const float* weight, const float* pre, std::int64_t N, int C, int OC,
                          weight_layout layout) {
  if (N == 0) return true;
  const bool in_out = layout == weight_layout::in_out;
  const operand dy(blas, dout, N * OC), w(blas, weight, static_cast<std::int64_t>(C) * OC);
  // dpre^T (C, N) = W'^T (C, OC) · dout^T (OC, N), times GELU'(pre^T) in the epilogue.
  return blas.lt().gemm_dgelu(blas.math(), in_out, C, static_cast<int>(N), OC, w.get(),
                              in_out ? OC : C, dy.get(), OC, pre, C, dpre, C);
}

void linear_backward(const blas_handle& blas, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, std::int64_t N,
                     int C, int OC, weight_layout layout) {
  if (N == 0) return;
  const int n = static_cast<int>(N);
  const cublasHandle_t h = handle_of(blas);
  const bool in_out = layout == weight_layout::in_out, b = blas.bf16();
  const operand dy(blas, dinp || dweight ? dout : nullptr, N * OC);
  if (dinp) {  // dinp^T (C, N) += W'^T (C, OC) · dout^T (OC, N)
    const operand w(blas, weight, static_cast<std::int64_t>(C) * OC);
    if (in_out)
      gemm(h, b, CUBLAS_OP_T, CUBLAS_OP_N, C, n, OC, w.get(), OC, dy.get(), OC, 1.f, dinp, C);
    else
      gemm(h, b, CUBLAS_OP_N, CUBLAS_OP_N, C, n, OC, w.get(), C, dy.get(), OC, 1.f, dinp, C);
  }
  if (dweight) {
    const operand x(blas, inp, N * C);
    if (dbias && !b) {
      // The bias gradient in the same GEMM's epilogue (it reads dout once for both), written
      // into scratch and then added: cuBLASLt writes it, dbias accumulates. Not under bf16, whose
      // GEMM reads dout's bf16 copy: the bias gradient stays the exact fp32 column sum there.
      const gpu_scratch sums(blas.memory(), sizeof(float) * static_cast<std::size_t>(OC), blas.stream());
      float* s = static_cast<float*>(sums.get());
      const bool fused =
          in_out ? blas.lt().gemm_bgrad(blas.math(), true, OC, C, n, dy.get(), OC, x.get(), C,
                                        dweight, OC, s)
                 : blas.lt().gemm_bgrad(blas.math(), false, C, OC, n, x.get(), C, dy.get(), OC,
                                        dweight, C, s);
      if (fused) {
        add_into(dbias, s, OC, blas.stream());
        return;
      }
    }
    if (in_out)  // dW (C, OC) row-major: dW^T (OC, C) += dout^T (OC, N) · inp (N, C)
      gemm(h, b, CUBLAS_OP_N, CUBLAS_OP_T, OC, C, n, dy.get(), OC, x.get(), C, 1.f, dweight, OC);
    else  // dW (OC, C) row-major: dW^T (C, OC) += inp^T (C, N) · dout (N, OC)
      gemm(h, b, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, n, x.get(), C, dy.get(), OC, 1.f, dweight, C);
  }
  if (dbias) {
    column_sums_into(dbias, dout, N, OC, blas.stream());
  }
}

}  // namespace pipeworks::cuda
