// Tests for ReLU and GELU: values against the formulas, finite-difference gradients, float
// against double (which exercises the fast float tanh), and accumulation into gradients.
#include "ops/layers/activation.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

double gelu_reference(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST_CASE("relu and gelu forward match their formulas", "[ops]") {
  const auto x = random_values(101, 1, -4, 4);
  std::vector<double> r(x.size()), g(x.size());
  relu_forward(r.data(), x.data(), std::int64_t(x.size()));
  gelu_forward(g.data(), x.data(), std::int64_t(x.size()));
  for (std::size_t i = 0; i < x.size(); i++) {
    REQUIRE(r[i] == std::max(x[i], 0.0));
    REQUIRE(g[i] == Approx(gelu_reference(x[i])).epsilon(1e-14).margin(1e-15));
  }
}

TEST_CASE("relu and gelu backward match finite differences", "[ops]") {
  const std::int64_t n = 40;
  auto x = random_values(n, 2, -3, 3);
  for (double& v : x)
    if (std::fabs(v) < 1e-3) v = 0.5;  // keep ReLU's kink out of the difference step
  const auto proj = random_values(n, 3);
  std::vector<double> out(n), dx(n);
  auto relu_loss = [&] {
    relu_forward(out.data(), x.data(), n);
    return dot(out, proj);
  };
  relu_backward(dx.data(), proj.data(), x.data(), n);
  CHECK(gradcheck(relu_loss, x.data(), n, dx.data()).max_rel_error < 1e-6);
  std::fill(dx.begin(), dx.end(), 0.0);
  auto gelu_loss = [&] {
    gelu_forward(out.data(), x.data(), n);
    return dot(out, proj);
  };
  gelu_backward(dx.data(), proj.data(), x.data(), n);
  CHECK(gradcheck(gelu_loss, x.data(), n, dx.data()).max_rel_error < 1e-6);
}

TEST_CASE("activation backward adds into the gradient", "[ops]") {
  const std::int64_t n = 9;
  const auto x = random_values(n, 4, -2, 2), dy = random_values(n, 5);
  std::vector<double> a(n), b(n, 2.0);
  gelu_backward(a.data(), dy.data(), x.data(), n);
  gelu_backward(b.data(), dy.data(), x.data(), n);
  for (int i = 0; i < n; i++) REQUIRE(b[i] == Approx(a[i] + 2.0));
  std::vector<double> c(n, 2.0);
  relu_backward(c.data(), dy.data(), x.data(), n);
  for (int i = 0; i < n; i++) REQUIRE(c[i] == 2.0 + (x[i] > 0 ? dy[i] : 0.0));
}

TEST_CASE("activations in float agree with double, across parallel chunks", "[ops]") {
  const std::int64_t n = 100003;  // several oneTBB chunks and a ragged tail
  const auto x = random_values(n, 6, -10, 10), dy = random_values(n, 7);
  std::vector<double> out(n), dx(n);
  std::vector<float> out_f(n), dx_f(n);
  gelu_forward(out.data(), x.data(), n);
  gelu_forward(out_f.data(), to_float(x).data(), n);
  CHECK(nmse(out_f, out) < 1e-12);
  gelu_backward(dx.data(), dy.data(), x.data(), n);
  gelu_backward(dx_f.data(), to_float(dy).data(), to_float(x).data(), n);
  CHECK(nmse(dx_f, dx) < 1e-12);
  relu_forward(out.data(), x.data(), n);
  relu_forward(out_f.data(), to_float(x).data(), n);
  CHECK(nmse(out_f, out) < 1e-13);
}

TEST_CASE("activation cost saves the input and has no parameters", "[ops]") {
  const layer_cost g = gelu_cost(128 * 1024, 4);
  CHECK(g.param_bytes == 0);
  CHECK(g.saved_bytes_per_sample == 128 * 1024 * 4);
  CHECK(g.output_bytes_per_sample == 128 * 1024 * 4);
  CHECK(g.flops_per_sample > relu_cost(128 * 1024, 4).flops_per_sample);
}

TEST_CASE("gelu backward overwrite gives the bits of adding into zeros", "[ops]") {
  const std::int64_t n = 100003;  // several oneTBB chunks and a ragged tail
  const auto x = to_float(random_values(n, 8, -10, 10));
  auto dy = to_float(random_values(n, 9));
  dy[5] = -0.0f;  // a negative zero comes out as +0 both ways
  std::vector<float> added(n, 0.0f), over(n, std::nanf(""));
  gelu_backward(added.data(), dy.data(), x.data(), n);
  gelu_backward(over.data(), dy.data(), x.data(), n, grad_into::overwrite);
  REQUIRE(std::memcmp(added.data(), over.data(), added.size() * sizeof(float)) == 0);
  CHECK(!std::signbit(over[5]));
}
