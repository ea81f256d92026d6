// cuBLASLt matrix products with work done in the GEMM's epilogue (no pass of its own over the
// output): the bias of a linear layer's forward, GELU's derivative in the input gradient of the
// layer after a GELU. One per blas_handle, on its stream.
#pragma once
#include <array>
#include <cstddef>
#include <map>

#include "ops/device/gpu_math.hpp"


namespace pipeworks {
class caching_allocator;
}

namespace pipeworks::cuda {

class lt_matmul {
 public:
  // On `stream` (a cudaStream_t); its workspace from `memory` (the rank's caching allocator, so
  // that the rank's peak counts it; null: cudaMalloc).
  lt_matmul(void* stream, caching_allocator* memory);
  ~lt_matmul();
  lt_matmul(const lt_matmul&) = delete;
  lt_matmul& operator=(const lt_matmul&) = delete;

  // D (m, n) column-major fp32 = op(A) (m, k) · B (k, n) + bias (m) broadcast over the columns;
  // A and B fp32 (math fp32: strict, tf32: TF32 tensor cores) or bf16 (math bf16, fp32
  // accumulation). transa: A is stored (k, m). False when cuBLASLt has no algorithm for the shape
  // (the caller falls back to a GEMM and a bias kernel).
  bool gemm_bias(gpu_math math, bool transa, int m, int n, int k, const void* A, int lda,
                 const void* B, int ldb, const float* bias, float* D, int ldd);
  // D (m, n) = (op(A) · B) ⊙ GELU'(pre), pre (m, n) column-major fp32 with leading dimension
  // ld_pre (a multiple of 8): the gradient of a GELU's input from its output's (cuBLASLt's DGELU
  // epilogue, GELU's tanh form). Otherwise as gemm_bias; false when cuBLASLt cannot.
  bool gemm_dgelu(gpu_math math, bool transa, int m, int n, int k, const void* A, int lda,
                  const void* B, int ldb, const float* pre, int ld_pre, float* D, int ldd);
  // D (m, n) += A (m, k) · B^T (B stored (n, k)), and dbias = the sums over k of A's rows (of_a:
  // m of them) or of B's (n of them), written, not added: a linear layer's weight gradient and
  // its bias gradient in one pass over the output gradient (cuBLASLt's BGRADA or BGRADB epilogue).
  // False when cuBLASLt cannot.
  bool gemm_bgrad(gpu_math math, bool of_a, int m, int n, int k, const void* A, int lda,
                  const void* B, int ldb, float* D, int ldd, float* dbias);

 private:
  enum class epilogue : long { bias, dgelu, bgrada, bgradb };
  // One product: D = op(A) op(B) + beta D, with `extra` the bias (bias), GELU's input (dgelu,
  // leading dimension ld_extra) or the bias gradient written (bgrada, bgradb).
  struct problem {
    epilogue e;
    gpu_math math;
    bool transa, transb;
    int m, n, k;
    const void* A;
    int lda;
    const void* B;
    int ldb;
    float beta;
    const void* extra;
    int ld_extra;
    float* D;
    int ldd;
  };
  bool gemm(const problem& p);
  void take_workspace();
  // Everything of the problem but its pointers, and the pointers' alignments (the algorithm must
  // suit them: the heuristic otherwise assumes 256 bytes).
  using key = std::array<long, 16>;
  struct algo {
    bool found = false;
    alignas(8) unsigned char bytes[64];  // a cublasLtMatmulAlgo_t (64 bytes)
  };
  void* handle_ = nullptr;     // cublasLtHandle_t
  void* stream_ = nullptr;
  caching_allocator* memory_ = nullptr;
  void* workspace_ = nullptr;  // device memory for split-K algorithms
  std::size_t workspace_bytes_ = 0;
  bool workspace_asked_ = false;
  std::map<key, algo> algos_;  // the heuristic's first choice per problem, asked once
};

}  // namespace pipeworks::cuda
