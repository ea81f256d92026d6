// Test helpers for models: random weights and inputs, the loss of a whole model, and a
// whole-model central finite-difference gradient check in double.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/model/model.hpp"
#include "tests/ops/gradcheck.hpp"

namespace pipeworks::test {

// Every parameter uniform in [-scale, scale), from seed.
inline void randomize(param_set& p, std::uint64_t seed, double scale = 0.5) {
  auto v = random_values(p.size(), seed, -scale, scale);
  auto w = p.values<double>();
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = v[i];
}

inline tensor random_tokens(std::int64_t B, std::int64_t Tn, int vocab, std::uint64_t seed) {
  tensor t({B, Tn}, dtype::i32);
  auto v = random_values(B * Tn, seed, 0, vocab);
  for (std::int64_t i = 0; i < B * Tn; ++i) t.data<std::int32_t>()[i] = static_cast<int>(v[i]);
  return t;
}

// The loss of the whole model on (input, ctx); input is copied, so it can be called repeatedly.
template <class T>
double model_loss(const model<T>& m, const param_set& p, const tensor& input,
                  const microbatch_ctx& ctx) {
  stage_forward f = forward_blocks(m, p, input.clone(), ctx);
  return static_cast<double>(loss_value<T>(f.output));
}

// Analytic gradient of the whole model's loss, in a param_set shaped like p.
template <class T>
param_set model_grad(const model<T>& m, const param_set& p, const tensor& input,
                     const microbatch_ctx& ctx) {
  param_set g = p.zeros_like();
  stage_forward f = forward_blocks(m, p, input.clone(), ctx);
  backward_blocks(m, p, g, std::move(f.saved), scalar_tensor<T>(T(1)), ctx);
  return g;
}

// Checks every parameter's gradient against central differences. A whole model's loss sums
// many terms, so its rounding noise is larger than one layer's: h = 1e-4 keeps the difference
// quotient's rounding error (about 1e-14 / h) well below the tolerance, and its truncation
// error (about h^2) too.
inline gradcheck_result check_model_gradient(const model<double>& m, param_set& p,
                                             const tensor& input, const microbatch_ctx& ctx,
                                             double h = 1e-4) {
  param_set g = model_grad(m, p, input, ctx);
  return gradcheck([&] { return model_loss(m, p, input, ctx); }, p.values<double>().data(),
                   p.size(), g.values<double>().data(), h);
}

}  // namespace pipeworks::test
