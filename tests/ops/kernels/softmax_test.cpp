// Tests for the softmax row kernels: probabilities, log-sum-exp, large inputs, and the
// backward against finite differences.
#include "ops/kernels/softmax.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

TEST_CASE("softmax_row gives probabilities and the log-sum-exp", "[ops]") {
  const auto x = random_values(13, 1, -5, 5);
  std::vector<double> p(13);
  const double lse = softmax_row(p.data(), x.data(), 13);
  double z = 0;
  for (double v : x) z += std::exp(v);
  CHECK(lse == Approx(std::log(z)).epsilon(1e-14));
  for (int i = 0; i < 13; i++) CHECK(p[i] == Approx(std::exp(x[i]) / z).epsilon(1e-14));
}

TEST_CASE("softmax_row in float is stable for large inputs", "[ops]") {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f}, p(3);
  const float lse = softmax_row(p.data(), x.data(), 3);
  CHECK(lse == Approx(1000.0f + std::log1p(std::exp(-1.0f))));
  CHECK(p[0] == Approx(1.0f / (1.0f + std::exp(-1.0f))));
  CHECK(p[2] == 0.0f);
}

TEST_CASE("softmax_backward_row matches finite differences", "[ops]") {
  const int n = 11;
  auto x = random_values(n, 2, -2, 2);
  const auto proj = random_values(n, 3);
  std::vector<double> p(n);
  auto loss = [&] {
    softmax_row(p.data(), x.data(), n);
    return dot(p, proj);
  };
  loss();
  std::vector<double> dx(n);
  softmax_backward_row(dx.data(), p.data(), proj.data(), n);
  CHECK(gradcheck(loss, x.data(), n, dx.data()).max_rel_error < 1e-6);
}
