// Matrix multiply for the layers, over OpenBLAS's cblas in float and double. Row-major with
// explicit row strides, so a head's slice of a wider buffer needs no copy.
#pragma once
#include <cstdint>

namespace pipeworks {

// C (M, N) = alpha op(A) op(B) + beta C. op(A) is (M, K): A is (M, K) with row stride lda, or
// (K, M) when trans_a. op(B) is (K, N): B is (K, N) with row stride ldb, or (N, K) when trans_b.
// C has row stride ldc. Large products are cut into blocks of C that run as oneTBB tasks, each a
// single-threaded OpenBLAS call, so oneTBB alone decides how many cores are busy.
template <class T>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
          int ldb, T beta, T* C, int ldc);

// The same product as one single-threaded OpenBLAS call on the calling thread; for use inside
// a parallel loop (attention's loop over batch and heads).
template <class T>
void gemm_serial(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda,
                 const T* B, int ldb, T beta, T* C, int ldc);

// Keeps OpenBLAS from starting its own threads (set_cpu_threads may have raised its count).
// gemm and gemm_serial call it; it costs one load when nothing needs changing.
void blas_single_threaded();

}  // namespace pipeworks
