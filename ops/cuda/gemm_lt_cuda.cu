// lt_matmul on cuBLASLt: one heuristic query per problem shape (cached), deterministic reduction
// schemes only (no atomics), the bias or GELU's derivative in the epilogue.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "base/result.hpp"
#include "ops/cuda/cublas_check.hpp"
#include "ops/cuda/gemm_lt_cuda.hpp"
#include "ops/device/caching_allocator.hpp"

namespace pipeworks::cuda {
namespace {

static_assert(sizeof(cublasLtMatmulAlgo_t) <= 64, "lt_matmul::algo holds a cublasLtMatmulAlgo_t");

// Owns a descriptor for the length of one call.
struct lt_objects {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~lt_objects() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// The largest power of two up to 256 that divides p's address.
std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t n = 256;
  while (n > 1 && a % n != 0) n /= 2;
  return n;
}

}  // namespace

lt_matmul::lt_matmul(void* stream, caching_allocator* memory) : stream_(stream), memory_(memory) {
  cublasLtHandle_t h = nullptr;
  PW_CUBLAS(cublasLtCreate(&h));
  handle_ = h;
}

// At the first product, not when the handle is made: by then the allocator may take room from
// another one of the GPU (a rank's second stream's, made when the rank's cache holds the GPU).
void lt_matmul::take_workspace() {
  if (workspace_asked_) return;
  workspace_asked_ = true;
  workspace_bytes_ = std::size_t{32} << 20;
  if (memory_) {
    try {
      workspace_ = memory_->allocate(workspace_bytes_);
    } catch (const pipeworks_error&) {  // no room: algorithms without a workspace only
      workspace_ = nullptr;
    }
  } else if (cudaMalloc(&workspace_, workspace_bytes_) != cudaSuccess) {
    cudaGetLastError();
    workspace_ = nullptr;
  }
  if (!workspace_) workspace_bytes_ = 0;
}

lt_matmul::~lt_matmul() {
  if (workspace_) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    if (memory_) memory_->deallocate(workspace_);
    else cudaFree(workspace_);
  }
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

bool lt_matmul::gemm_bias(gpu_math math, bool transa, int m, int n, int k, const void* A, int lda,
                          const void* B, int ldb, const float* bias, float* D, int ldd) {
  if (alignment(bias) < 16) return false;  // the bias epilogue reads it in 16-byte pieces
  return gemm({epilogue::bias, math, transa, false, m, n, k, A, lda, B, ldb, 0.f, bias, 0, D, ldd});
}

bool lt_matmul::gemm_dgelu(gpu_math math, bool transa, int m, int n, int k, const void* A, int lda,
                           const void* B, int ldb, const float* pre, int ld_pre, float* D, int ldd) {
  // GELU's input is read in 16-byte pieces; its leading dimension must be a multiple of 8.
  if (alignment(pre) < 16 || ld_pre % 8 != 0 || ld_pre < m) return false;
  return gemm({epilogue::dgelu, math, transa, false, m, n, k, A, lda, B, ldb, 0.f, pre, ld_pre, D,
               ldd});
}

bool lt_matmul::gemm_bgrad(gpu_math math, bool of_a, int m, int n, int k, const void* A, int lda,
                           const void* B, int ldb, float* D, int ldd, float* dbias) {
  if (alignment(dbias) < 16) return false;  // written in 16-byte pieces
  return gemm({of_a ? epilogue::bgrada : epilogue::bgradb, math, false, true, m, n, k, A, lda, B,
               ldb, 1.f, dbias, 0, D, ldd});
}

bool lt_matmul::gemm(const problem& p) {
  take_workspace();
  const std::uint32_t align_a = alignment(p.A), align_b = alignment(p.B), align_d = alignment(p.D),
                      align_x = alignment(p.extra);
  const key kk{static_cast<long>(p.e), static_cast<long>(p.math), p.transa, p.transb, p.m, p.n,
               p.k, p.lda, p.ldb, p.ldd, p.ld_extra, p.beta != 0.f, align_a, align_b, align_d,
               align_x};
  auto it = algos_.find(kk);
  if (it != algos_.end() && !it->second.found) return false;
  const bool bf16 = p.math == gpu_math::bf16;
  const cudaDataType_t ab = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      p.math == gpu_math::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  lt_objects o;
  PW_CUBLAS(cublasLtMatmulDescCreate(&o.desc, compute, CUDA_R_32F));
  const cublasOperation_t ta = p.transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = p.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_BIAS;
  switch (p.e) {
    case epilogue::bias: kind = CUBLASLT_EPILOGUE_BIAS; break;
    case epilogue::dgelu: kind = CUBLASLT_EPILOGUE_DGELU; break;
    case epilogue::bgrada: kind = CUBLASLT_EPILOGUE_BGRADA; break;
    case epilogue::bgradb: kind = CUBLASLT_EPILOGUE_BGRADB; break;
  }
  PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof kind));
  const cudaDataType_t fp32 = CUDA_R_32F;
  if (p.e == epilogue::dgelu) {  // GELU's input, fp32 as D is (the aux type's default, set to say so)
    const std::int64_t ld = p.ld_extra;
    const std::int32_t aux_type = CUDA_R_32F;
    PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                             &p.extra, sizeof p.extra));
    PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                             sizeof ld));
    PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                             &aux_type, sizeof aux_type));
  } else {  // the bias read (bias) or the bias gradient written (bgrada, bgradb), fp32
    PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.extra,
                                             sizeof p.extra));
    PW_CUBLAS(cublasLtMatmulDescSetAttribute(o.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &fp32,
                                             sizeof fp32));
  }
  PW_CUBLAS(cublasLtMatrixLayoutCreate(&o.a, ab, p.transa ? p.k : p.m, p.transa ? p.m : p.k, p.lda));
  PW_CUBLAS(cublasLtMatrixLayoutCreate(&o.b, ab, p.transb ? p.n : p.k, p.transb ? p.k : p.n, p.ldb));
  PW_CUBLAS(cublasLtMatrixLayoutCreate(&o.d, CUDA_R_32F, p.m, p.n, p.ldd));
  if (it == algos_.end()) {  // asked once per problem (entered only once the query has run)
    algo found_algo;
    PW_CUBLAS(cublasLtMatmulPreferenceCreate(&o.pref));
    PW_CUBLAS(cublasLtMatmulPreferenceSetAttribute(o.pref,
                                                   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspace_bytes_, sizeof workspace_bytes_));
    for (const auto& [attr, v] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a},
                                  std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b},
                                  std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d},
                                  std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d}})
      PW_CUBLAS(cublasLtMatmulPreferenceSetAttribute(o.pref, attr, v, sizeof *v));
    // Split-K only by schemes that reduce in a fixed order: a run repeats bit for bit.
    const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_INPLACE |
                                  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                                  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    PW_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        o.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
        static_cast<cublasLtHandle_t>(handle_), o.desc, o.a, o.b, o.d, o.d, o.pref, 1, &result,
        &found);
    found_algo.found = s == CUBLAS_STATUS_SUCCESS && found > 0;
    if (found_algo.found) std::memcpy(found_algo.bytes, &result.algo, sizeof result.algo);
    it = algos_.emplace(kk, found_algo).first;
  }
  if (!it->second.found) return false;
  cublasLtMatmulAlgo_t a;
  std::memcpy(&a, it->second.bytes, sizeof a);
  const float one = 1.f;
  const cublasStatus_t s = cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), o.desc, &one,
                                          p.A, o.a, p.B, o.b, &p.beta, p.D, o.d, p.D, o.d, &a,
                                          workspace_, workspace_bytes_,
                                          static_cast<cudaStream_t>(stream_));
  // The caller's GEMM and its own kernel from now on (an epilogue this cuBLASLt refuses for the
  // problem is an invalid value to some versions).
  if (s == CUBLAS_STATUS_NOT_SUPPORTED ||
      (p.e != epilogue::bias && s == CUBLAS_STATUS_INVALID_VALUE)) {
    it->second.found = false;
    return false;
  }
  PW_CUBLAS(s);
  return true;
}

}  // namespace pipeworks::cuda
