// Tests for the split backward of the zero-bubble schedules: backward_input_blocks (I) then
// backward_weight_blocks (W), run apart over a model cut into two stages, with W at once or after
// another microbatch's B into the same gradient buffer, gives the input gradient and the weight
// gradients of backward_blocks (B). (A block's backward is its two halves; central differences
// check the gradients themselves, in each block's and layer's tests.)
#include <catch2/catch.hpp>
#include <cmath>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"
#include "tests/ops/model/model_checks.hpp"

using namespace pipeworks;

namespace {

// max |a - b| / max |b|: the error normalised by the reference's scale.
template <class T>
double normalised_error(std::span<const T> a, std::span<const T> b) {
  REQUIRE(a.size() == b.size());
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? err / scale : err;
}

template <class T>
std::span<const T> span_of(const tensor& t) {
  return {t.data<T>(), static_cast<std::size_t>(t.numel())};
}

template <class T>
void require_same_grads(const param_set& got, const param_set& want, double tol) {
  REQUIRE(got.entries().size() == want.entries().size());
  for (const auto& e : want.entries()) {
    INFO(e.name);
    const double err = normalised_error<T>(got.values<T>(*got.find(e.name)), want.values<T>(e));
    CHECK(err <= tol);
  }
}

struct microbatch_data {
  tensor input;
  microbatch_ctx ctx;
};

// Two stages [0, cut) and [cut, end). The reference runs B for microbatch a, then for b. The
// split runs I for a on both stages, then (with interleave) the whole B for b, then W for a, then
// (without interleave) B for b. Same cut gradient for a, same accumulated gradients.
template <class T>
void check_split(const model<T>& m, int cut, const microbatch_data& a, const microbatch_data& b,
                 bool interleave, double tol) {
  const std::uint64_t seed = 11;
  param_set p0 = m.init_params(seed, 0, cut), p1 = m.init_params(seed, cut, m.size());
  auto forward = [&](const microbatch_data& mb) {
    stage_forward f0 = forward_blocks(m, p0, mb.input.clone(), mb.ctx);
    stage_forward f1 = forward_blocks(m, p1, std::move(f0.output), mb.ctx);
    return std::pair{std::move(f0.saved), std::move(f1.saved)};
  };
  auto full_backward = [&](const microbatch_data& mb, param_set& g0, param_set& g1) {
    auto [s0, s1] = forward(mb);
    tensor d = backward_blocks(m, p1, g1, std::move(s1), scalar_tensor<T>(T(0.5)), mb.ctx);
    REQUIRE(backward_blocks(m, p0, g0, std::move(s0), std::move(d), mb.ctx).empty());
  };

  param_set r0 = p0.zeros_like(), r1 = p1.zeros_like();
  tensor d_ref;
  {
    auto [s0, s1] = forward(a);
    d_ref = backward_blocks(m, p1, r1, std::move(s1), scalar_tensor<T>(T(0.5)), a.ctx);
    REQUIRE(backward_blocks(m, p0, r0, std::move(s0), d_ref.clone(), a.ctx).empty());
  }
  full_backward(b, r0, r1);

  param_set g0 = p0.zeros_like(), g1 = p1.zeros_like();
  stage_deferred later0, later1;
  auto [s0, s1] = forward(a);
  tensor d = backward_input_blocks(m, p1, std::move(s1), scalar_tensor<T>(T(0.5)), a.ctx, later1);
  REQUIRE(later1.blocks.size() == static_cast<std::size_t>(p1.block_count()));
  REQUIRE(later1.bytes() > 0);
  REQUIRE(d.shape() == d_ref.shape());
  CHECK(normalised_error<T>(span_of<T>(d), span_of<T>(d_ref)) <= tol);
  REQUIRE(backward_input_blocks(m, p0, std::move(s0), std::move(d), a.ctx, later0).empty());
  // I leaves the gradient buffers alone.
  for (const param_set* g : {&g0, &g1})
    for (T v : g->values<T>()) REQUIRE(v == T(0));
  if (interleave) full_backward(b, g0, g1);
  backward_weight_blocks(m, p1, g1, std::move(later1));
  backward_weight_blocks(m, p0, g0, std::move(later0));
  if (!interleave) full_backward(b, g0, g1);
  require_same_grads<T>(g0, r0, tol);
  require_same_grads<T>(g1, r1, tol);
}

template <class T>
microbatch_data gpt_batch(std::int64_t B, std::int64_t Tn, std::uint64_t seed) {
  auto targets = std::make_shared<const tensor>(test::random_tokens(B, Tn, 256, seed + 1));
  return {test::random_tokens(B, Tn, 256, seed), microbatch_ctx{B, targets}};
}

template <class T>
microbatch_data mlp_batch(std::int64_t B, int inputs, int classes, std::uint64_t seed) {
  tensor x({B, inputs}, dtype_of<T>());
  auto v = test::random_values(B * inputs, seed);
  for (std::int64_t i = 0; i < B * inputs; ++i) x.data<T>()[i] = static_cast<T>(v[i]);
  auto t = std::make_shared<tensor>(shape_t{B}, dtype::i32);
  auto c = test::random_values(B, seed + 1, 0, classes);
  for (std::int64_t i = 0; i < B; ++i) t->data<std::int32_t>()[i] = static_cast<int>(c[i]);
  return {std::move(x), microbatch_ctx{B, std::move(t)}};
}

template <class T>
void check_mlp(double tol) {
  const mlp_config cfg{.inputs = 20, .hidden = {16, 12}, .classes = 5};
  model<T> m = make_mlp<T>(cfg);
  microbatch_data a = mlp_batch<T>(4, 20, 5, 1), b = mlp_batch<T>(4, 20, 5, 7);
  for (int cut : {1, 2})
    for (bool interleave : {false, true}) {
      INFO("cut " << cut << ", interleave " << interleave);
      check_split(m, cut, a, b, interleave, tol);
    }
}

template <class T>
void check_gpt(const model<T>& m, std::int64_t B, std::int64_t Tn, double tol) {
  microbatch_data a = gpt_batch<T>(B, Tn, 3), b = gpt_batch<T>(B, Tn, 13);
  for (int cut : {1, 2, m.size() - 1})
    for (bool interleave : {false, true}) {
      INFO("cut " << cut << ", interleave " << interleave);
      check_split(m, cut, a, b, interleave, tol);
    }
}

}  // namespace

TEST_CASE("split backward of the mlp matches backward_blocks", "[ops]") {
  SECTION("double") { check_mlp<double>(1e-12); }
  SECTION("float") { check_mlp<float>(1e-5); }
}

TEST_CASE("split backward of gpt-tiny matches backward_blocks", "[ops]") {
  SECTION("double") { check_gpt(make_gpt<double>(gpt_tiny()), 2, 64, 1e-12); }
  SECTION("float") { check_gpt(make_gpt<float>(gpt_tiny()), 2, 64, 1e-5); }
}

TEST_CASE("split backward of a 2-layer gpt at batch 2, T 8 matches backward_blocks", "[ops]") {
  const gpt_config cfg{.context = 16, .layers = 2, .heads = 2, .width = 32, .vocab = 256};
  SECTION("double") { check_gpt(make_gpt<double>(cfg), 2, 8, 1e-12); }
  SECTION("float") { check_gpt(make_gpt<float>(cfg), 2, 8, 1e-5); }
}

TEST_CASE("the weight half checks that it got one deferred entry per block", "[ops]") {
  model<double> m = make_mlp<double>({.inputs = 4, .hidden = {3}, .classes = 2});
  param_set p = m.init_params(1);
  param_set g = p.zeros_like();
  REQUIRE_THROWS_WITH(backward_weight_blocks(m, p, g, stage_deferred{}),
                      Catch::Contains("0 deferred blocks, the stage has 2"));
  stage_deferred later;
  REQUIRE_THROWS_WITH(
      backward_input_blocks(m, p, std::vector<stash>(1), scalar_tensor(1.0), {}, later),
      Catch::Contains("the stash has 1 blocks, the stage 2"));
}
