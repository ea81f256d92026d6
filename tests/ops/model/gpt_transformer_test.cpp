// Tests for one GPT transformer block on its own: the residual path, and the gradient of its
// input and weights against central differences in double.
#include <catch2/catch.hpp>

#include "ops/model/gpt.hpp"
#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

namespace {
const gpt_config cfg{.context = 6, .layers = 3, .heads = 2, .width = 8};
const std::int64_t B = 2, Tn = 4, C = 8;

tensor random_x(std::uint64_t seed) {
  tensor x({B, Tn, C}, dtype::f64);
  auto v = test::random_values(B * Tn * C, seed);
  std::copy(v.begin(), v.end(), x.data<double>());
  return x;
}

// loss = sum(out * r), a fixed random projection of the block's output.
double projected(const gpt_transformer_block<double>& blk, const double* w, const tensor& x,
                 const std::vector<double>& r) {
  block_forward f = blk.forward(host_context(), w, x.clone(), {B, nullptr});
  const double* o = f.output.data<double>();
  double s = 0;
  for (std::size_t i = 0; i < r.size(); ++i) s += o[i] * r[i];
  return s;
}
}  // namespace

TEST_CASE("transformer block with zero projections is the identity (residuals)", "[ops]") {
  gpt_transformer_block<double> blk(cfg, 1);
  std::vector<double> w(static_cast<std::size_t>(spec_offsets(blk.params()).back()), 0.0);
  tensor x = random_x(1);
  block_forward f = blk.forward(host_context(), w.data(), x.clone(), {B, nullptr});
  REQUIRE(f.output.shape() == shape_t{B, Tn, C});
  for (std::int64_t i = 0; i < x.numel(); ++i)
    REQUIRE(f.output.data<double>()[i] == Approx(x.data<double>()[i]).margin(1e-12));
}

TEST_CASE("transformer block gradients match central differences in double", "[ops]") {
  gpt_transformer_block<double> blk(cfg, 1);
  const std::int64_t n = spec_offsets(blk.params()).back();
  std::vector<double> w = test::random_values(n, 2, -0.3, 0.3);
  tensor x = random_x(3);
  const std::vector<double> r = test::random_values(B * Tn * C, 4);

  block_forward f = blk.forward(host_context(), w.data(), x.clone(), {B, nullptr});
  tensor dout({B, Tn, C}, dtype::f64);
  std::copy(r.begin(), r.end(), dout.data<double>());
  std::vector<double> dw(static_cast<std::size_t>(n), 0.0);
  tensor dx = blk.backward(host_context(), w.data(), dw.data(), std::move(f.saved), std::move(dout),
                           {B, nullptr});

  auto rw = test::gradcheck([&] { return projected(blk, w.data(), x, r); }, w.data(), n, dw.data());
  INFO("weights: element " << rw.worst << " analytic " << rw.analytic << " numeric " << rw.numeric);
  REQUIRE(rw.max_rel_error < 1e-6);
  auto rx = test::gradcheck([&] { return projected(blk, w.data(), x, r); }, x.data<double>(),
                            x.numel(), dx.data<double>());
  INFO("input: element " << rx.worst << " analytic " << rx.analytic << " numeric " << rx.numeric);
  REQUIRE(rx.max_rel_error < 1e-6);
}
