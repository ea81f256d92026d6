// gemm over cblas: single-threaded OpenBLAS calls, tiled over oneTBB for large products.
#include "ops/kernels/gemm.hpp"

#include <cblas.h>

#include <algorithm>

#include "ops/kernels/parallel.hpp"

namespace pipeworks {
namespace {

// Products below this many multiply-adds run as one call: splitting costs more than it gains.
constexpr double serial_below_madds = 1 << 21;
// Block edges are multiples of this, so every block keeps whole vector registers of C.
constexpr int block_align = 16;

void blas_call(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void blas_call(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
               const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void blas_single_threaded() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

template <class T>
void gemm_serial(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda,
                 const T* B, int ldb, T beta, T* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  blas_single_threaded();
  blas_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
          int ldb, T beta, T* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  blas_single_threaded();
  const int threads = kernel_threads();
  const double madds = double(M) * N * std::max(K, 1);
  const bool split_rows = M >= N;
  const int extent = split_rows ? M : N;
  const int blocks = std::min(threads, extent / block_align);
  if (threads == 1 || madds < serial_below_madds || blocks < 2) {
    blas_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Block b covers [edge(b), edge(b+1)) of C's rows (or columns), edges rounded to block_align.
  auto edge = [&](int b) {
    if (b == blocks) return extent;
    return int((std::int64_t(extent) * b / blocks) / block_align * block_align);
  };
  tbb::parallel_for(0, blocks, [&](int b) {
    const int lo = edge(b), len = edge(b + 1) - lo;
    if (split_rows) {
      const T* a = trans_a ? A + lo : A + std::int64_t(lo) * lda;
      blas_call(trans_a, trans_b, len, N, K, alpha, a, lda, B, ldb, beta,
                C + std::int64_t(lo) * ldc, ldc);
    } else {
      const T* b_ = trans_b ? B + std::int64_t(lo) * ldb : B + lo;
      blas_call(trans_a, trans_b, M, len, K, alpha, A, lda, b_, ldb, beta, C + lo, ldc);
    }
  });
}

#define PIPEWORKS_GEMM(T)                                                                         \
  template void gemm<T>(bool, bool, int, int, int, T, const T*, int, const T*, int, T, T*, int);  \
  template void gemm_serial<T>(bool, bool, int, int, int, T, const T*, int, const T*, int, T, T*, \
                               int);
PIPEWORKS_GEMM(float)
PIPEWORKS_GEMM(double)
#undef PIPEWORKS_GEMM

}  // namespace pipeworks
