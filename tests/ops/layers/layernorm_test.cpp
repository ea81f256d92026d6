// Tests for layernorm: normalised rows, finite-difference gradients for input, weight and bias,
// a row count that spans several backward chunks, and float against double.
#include "ops/layers/layernorm.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

TEST_CASE("layernorm forward gives rows of mean 0 and variance 1 before the affine", "[ops]") {
  const std::int64_t N = 7;
  const int C = 12;
  const auto x = random_values(N * C, 1, -3, 5);
  const std::vector<double> ones(C, 1.0), zeros(C, 0.0);
  std::vector<double> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), ones.data(), zeros.data(), N,
                    C);
  for (int n = 0; n < N; n++) {
    double m = 0, v = 0, xm = 0, xv = 0;
    for (int i = 0; i < C; i++) m += out[n * C + i] / C, xm += x[n * C + i] / C;
    for (int i = 0; i < C; i++) {
      v += (out[n * C + i] - m) * (out[n * C + i] - m) / C;
      xv += (x[n * C + i] - xm) * (x[n * C + i] - xm) / C;
    }
    CHECK(m == Approx(0.0).margin(1e-12));
    CHECK(v == Approx(xv / (xv + layernorm_eps)).epsilon(1e-12));
    CHECK(mean[n] == Approx(xm).epsilon(1e-12));
    CHECK(rstd[n] == Approx(1 / std::sqrt(xv + layernorm_eps)).epsilon(1e-12));
  }
}

TEST_CASE("layernorm backward matches finite differences", "[ops]") {
  // 70 rows: more than two of the backward's fixed row chunks, so partial sums are combined.
  for (std::int64_t N : {std::int64_t(10), std::int64_t(70)}) {
    const int C = 8;
    auto x = random_values(N * C, 2, -2, 2), w = random_values(C, 3), b = random_values(C, 4);
    const auto proj = random_values(N * C, 5);
    std::vector<double> out(N * C), mean(N), rstd(N);
    auto loss = [&] {
      layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
      return dot(out, proj);
    };
    loss();
    std::vector<double> dx(N * C), dw(C), db(C);
    layernorm_backward(dx.data(), dw.data(), db.data(), proj.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
    CHECK(gradcheck(loss, x.data(), N * C, dx.data()).max_rel_error < 1e-6);
    CHECK(gradcheck(loss, w.data(), C, dw.data()).max_rel_error < 1e-6);
    CHECK(gradcheck(loss, b.data(), C, db.data()).max_rel_error < 1e-6);
  }
}

TEST_CASE("layernorm backward adds into its gradients", "[ops]") {
  const std::int64_t N = 5;
  const int C = 6;
  const auto x = random_values(N * C, 6), w = random_values(C, 7), b = random_values(C, 8);
  const auto dy = random_values(N * C, 9);
  std::vector<double> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<double> dx(N * C), dw(C), db(C), dx2(N * C, 1.0), dw2(C, 1.0), db2(C, 1.0);
  layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  layernorm_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  for (std::size_t i = 0; i < dx.size(); i++) REQUIRE(dx2[i] == Approx(dx[i] + 1.0));
  for (int i = 0; i < C; i++) REQUIRE(dw2[i] == Approx(dw[i] + 1.0));
  for (int i = 0; i < C; i++) REQUIRE(db2[i] == Approx(db[i] + 1.0));
}

TEST_CASE("layernorm in float agrees with double", "[ops]") {
  const std::int64_t N = 300;
  const int C = 64;
  const auto x = random_values(N * C, 10, -3, 3), w = random_values(C, 11),
             b = random_values(C, 12);
  const auto dy = random_values(N * C, 13);
  std::vector<double> out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
  std::vector<float> out_f(N * C), mean_f(N), rstd_f(N), dx_f(N * C), dw_f(C), db_f(C);
  const auto xf = to_float(x), wf = to_float(w), bf = to_float(b), dyf = to_float(dy);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), xf.data(), wf.data(), bf.data(), N,
                    C);
  CHECK(nmse(out_f, out) < 1e-12);
  layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  layernorm_backward(dx_f.data(), dw_f.data(), db_f.data(), dyf.data(), xf.data(), wf.data(),
                     mean_f.data(), rstd_f.data(), N, C);
  CHECK(nmse(dx_f, dx) < 1e-10);
  CHECK(nmse(dw_f, dw) < 1e-10);
  CHECK(nmse(db_f, db) < 1e-10);
}

TEST_CASE("layernorm cost saves the input, mean and rstd", "[ops]") {
  const layer_cost c = layernorm_cost(128, 256, 4);
  CHECK(c.param_bytes == 2 * 256 * 4);
  CHECK(c.saved_bytes_per_sample == 128 * (256 + 2) * 4);
  CHECK(c.output_bytes_per_sample == 128 * 256 * 4);
  CHECK(c.flops_per_sample > 0);
}
