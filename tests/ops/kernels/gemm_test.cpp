// Tests for gemm: every transpose combination with strided operands against a naive product,
// in double and float, serial and cut into oneTBB blocks along rows and along columns.
#include "ops/kernels/gemm.hpp"

#include <tbb/global_control.h>

#include <catch2/catch.hpp>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

// Runs gemm (or gemm_serial) on operands embedded in wider buffers (row stride + 3) and checks
// every element of C, including that the padding columns are left alone.
template <class T>
void check_product(int M, int N, int K, bool ta, bool tb, bool serial, double tol) {
  const int pad = 3;
  const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  const auto a = random_values(std::int64_t(a_rows) * lda, 1),
             b = random_values(std::int64_t(b_rows) * ldb, 2);
  const auto c0 = random_values(std::int64_t(M) * ldc, 3);
  const std::vector<T> at(a.begin(), a.end()), bt(b.begin(), b.end());
  std::vector<T> c(c0.begin(), c0.end());
  const double alpha = 0.5, beta = 2.0;
  if (serial)
    gemm_serial<T>(ta, tb, M, N, K, T(alpha), at.data(), lda, bt.data(), ldb, T(beta), c.data(),
                   ldc);
  else
    gemm<T>(ta, tb, M, N, K, T(alpha), at.data(), lda, bt.data(), ldb, T(beta), c.data(), ldc);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < ldc; j++) {
      double want = c0[i * ldc + j];
      if (j < N) {
        double s = 0;
        for (int k = 0; k < K; k++)
          s += (ta ? a[k * lda + i] : a[i * lda + k]) * (tb ? b[j * ldb + k] : b[k * ldb + j]);
        want = alpha * s + beta * want;
      }
      REQUIRE(double(c[i * ldc + j]) == Approx(want).epsilon(tol).margin(tol));
    }
}

}  // namespace

TEST_CASE("gemm_serial matches a naive product for every transpose", "[ops]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_product<double>(7, 5, 6, ta, tb, true, 1e-12);
      check_product<float>(7, 5, 6, ta, tb, true, 1e-5);
    }
}

TEST_CASE("gemm cut into blocks matches a naive product", "[ops]") {
  tbb::global_control two(tbb::global_control::max_allowed_parallelism, 2);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_product<double>(200, 100, 120, ta, tb, false, 1e-12);  // cut along rows
      check_product<double>(90, 230, 110, ta, tb, false, 1e-12);   // cut along columns
    }
  check_product<float>(210, 130, 96, false, true, false, 1e-4);
}

TEST_CASE("gemm on one thread and small products stay correct", "[ops]") {
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  check_product<double>(200, 100, 120, true, false, false, 1e-12);
  check_product<double>(1, 1, 1, false, false, false, 1e-12);
  check_product<double>(3, 4, 0, false, false, false, 1e-12);  // K = 0: C = beta C
}
