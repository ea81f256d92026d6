// Tests for the linear layer: a naive reference product, finite-difference gradients in both
// weight layouts with and without bias, accumulation into gradients (and overwrite as adding into
// zeros), float against double.
#include "ops/layers/linear.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr std::int64_t N = 6;
constexpr int C = 5, OC = 7;

std::vector<double> reference(const std::vector<double>& x, const std::vector<double>& w,
                              const double* bias, weight_layout layout) {
  std::vector<double> out(N * OC);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = bias ? bias[o] : 0.0;
      for (int c = 0; c < C; c++)
        s += x[n * C + c] * (layout == weight_layout::in_out ? w[c * OC + o] : w[o * C + c]);
      out[n * OC + o] = s;
    }
  return out;
}

}  // namespace

TEST_CASE("linear forward matches a naive product in both layouts", "[ops]") {
  const auto x = random_values(N * C, 1), w = random_values(C * OC, 2), b = random_values(OC, 3);
  for (auto layout : {weight_layout::in_out, weight_layout::out_in}) {
    for (bool with_bias : {true, false}) {
      std::vector<double> out(N * OC, 99.0);
      const double* bias = with_bias ? b.data() : nullptr;
      linear_forward(out.data(), x.data(), w.data(), bias, N, C, OC, layout);
      const auto want = reference(x, w, bias, layout);
      for (std::size_t i = 0; i < out.size(); i++)
        REQUIRE(out[i] == Approx(want[i]).epsilon(1e-12));
    }
  }
}

TEST_CASE("linear backward matches finite differences", "[ops]") {
  for (auto layout : {weight_layout::in_out, weight_layout::out_in}) {
    for (bool with_bias : {true, false}) {
      auto x = random_values(N * C, 4), w = random_values(C * OC, 5), b = random_values(OC, 6);
      const auto proj = random_values(N * OC, 7);
      std::vector<double> out(N * OC);
      auto loss = [&] {
        linear_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC,
                       layout);
        return dot(out, proj);
      };
      std::vector<double> dx(N * C), dw(C * OC), db(OC);
      linear_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, proj.data(), x.data(),
                      w.data(), N, C, OC, layout);
      CHECK(gradcheck(loss, x.data(), N * C, dx.data()).max_rel_error < 1e-6);
      CHECK(gradcheck(loss, w.data(), C * OC, dw.data()).max_rel_error < 1e-6);
      if (with_bias) {
        CHECK(gradcheck(loss, b.data(), OC, db.data()).max_rel_error < 1e-6);
      }
    }
  }
}

TEST_CASE("linear backward adds into gradients and skips null ones", "[ops]") {
  const auto x = random_values(N * C, 8), w = random_values(C * OC, 9),
             dy = random_values(N * OC, 10);
  std::vector<double> dx(N * C), dw(C * OC), db(OC);
  linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC,
                  weight_layout::in_out);
  std::vector<double> dx2(N * C, 1.0), dw2(C * OC, 1.0), db2(OC, 1.0);
  linear_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), N, C, OC,
                  weight_layout::in_out);
  for (std::size_t i = 0; i < dx.size(); i++) REQUIRE(dx2[i] == Approx(dx[i] + 1.0));
  for (std::size_t i = 0; i < dw.size(); i++) REQUIRE(dw2[i] == Approx(dw[i] + 1.0));
  for (std::size_t i = 0; i < db.size(); i++) REQUIRE(db2[i] == Approx(db[i] + 1.0));
  std::vector<double> dw3(C * OC);
  linear_backward<double>(nullptr, dw3.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC,
                          weight_layout::in_out);
  for (std::size_t i = 0; i < dw.size(); i++) REQUIRE(dw3[i] == Approx(dw[i]));
}

TEST_CASE("linear forward in float agrees with double", "[ops]") {
  constexpr std::int64_t n = 64;
  constexpr int c = 48, oc = 40;
  const auto x = random_values(n * c, 11), w = random_values(c * oc, 12), b = random_values(oc, 13);
  std::vector<double> out(n * oc);
  std::vector<float> out_f(n * oc);
  for (auto layout : {weight_layout::in_out, weight_layout::out_in}) {
    linear_forward(out.data(), x.data(), w.data(), b.data(), n, c, oc, layout);
    linear_forward(out_f.data(), to_float(x).data(), to_float(w).data(), to_float(b).data(), n, c,
                   oc, layout);
    CHECK(nmse(out_f, out) < 1e-10);
  }
}

TEST_CASE("linear cost counts weights, bias, saved input and multiply-adds", "[ops]") {
  const layer_cost c = linear_cost(128, 256, 768, true, 4);
  CHECK(c.param_bytes == (256 * 768 + 768) * 4);
  CHECK(c.saved_bytes_per_sample == 128 * 256 * 4);
  CHECK(c.output_bytes_per_sample == 128 * 768 * 4);
  CHECK(c.flops_per_sample == 2LL * 128 * 256 * 768 + 128 * 768);
  CHECK(linear_cost(1, 784, 10, false, 4).param_bytes == 7840 * 4);
}

TEST_CASE("linear backward overwrite gives the bits of adding into zeros", "[ops]") {
  // Large enough for gemm's oneTBB blocks; the overwritten buffer starts as garbage (NaN).
  constexpr std::int64_t n = 512;
  constexpr int c = 96, oc = 80;
  const auto x = to_float(random_values(n * c, 21)), w = to_float(random_values(c * oc, 22)),
             dy = to_float(random_values(n * oc, 23));
  for (auto layout : {weight_layout::in_out, weight_layout::out_in}) {
    std::vector<float> added(n * c, 0.0f), over(n * c, std::nanf(""));
    linear_backward<float>(added.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), n, c, oc,
                           layout);
    linear_backward<float>(over.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), n, c, oc,
                           layout, grad_into::overwrite);
    REQUIRE(std::memcmp(added.data(), over.data(), added.size() * sizeof(float)) == 0);
  }
}
