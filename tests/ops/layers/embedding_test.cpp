// Tests for the token plus position embedding: the lookup, finite-difference gradients of both
// tables with repeated tokens, and accumulation into the gradients.
#include "ops/layers/embedding.hpp"

#include <catch2/catch.hpp>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int B = 2, Tn = 5, C = 8, V = 11, maxT = 7;
// Token 3 appears three times and token 0 twice, so the backward must add, not assign.
const std::vector<std::int32_t> tokens = {3, 0, 3, 10, 1, 0, 3, 7, 2, 9};

}  // namespace

TEST_CASE("embedding forward adds the token row and the position row", "[ops]") {
  const auto wte = random_values(V * C, 1), wpe = random_values(maxT * C, 2);
  std::vector<double> out(B * Tn * C);
  embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, Tn, C);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < Tn; t++)
      for (int i = 0; i < C; i++)
        REQUIRE(out[(b * Tn + t) * C + i] == wte[tokens[b * Tn + t] * C + i] + wpe[t * C + i]);
}

TEST_CASE("embedding backward matches finite differences", "[ops]") {
  auto wte = random_values(V * C, 3), wpe = random_values(maxT * C, 4);
  const auto proj = random_values(B * Tn * C, 5);
  std::vector<double> out(B * Tn * C);
  auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, Tn, C);
    return dot(out, proj);
  };
  std::vector<double> dwte(V * C), dwpe(maxT * C);
  embedding_backward(dwte.data(), dwpe.data(), proj.data(), tokens.data(), B, Tn, C);
  CHECK(gradcheck(loss, wte.data(), V * C, dwte.data()).max_rel_error < 1e-6);
  CHECK(gradcheck(loss, wpe.data(), maxT * C, dwpe.data()).max_rel_error < 1e-6);
  // Rows of unused tokens and positions past Tn get no gradient.
  for (int i = 0; i < C; i++) CHECK(dwte[4 * C + i] == 0.0);
  for (int i = 0; i < C; i++) CHECK(dwpe[6 * C + i] == 0.0);
}

TEST_CASE("embedding backward adds into the gradients", "[ops]") {
  const auto dy = random_values(B * Tn * C, 6);
  std::vector<double> a(V * C), ap(maxT * C), b(V * C, 1.0), bp(maxT * C, 1.0);
  embedding_backward(a.data(), ap.data(), dy.data(), tokens.data(), B, Tn, C);
  embedding_backward(b.data(), bp.data(), dy.data(), tokens.data(), B, Tn, C);
  for (std::size_t i = 0; i < a.size(); i++) REQUIRE(b[i] == Approx(a[i] + 1.0));
  for (std::size_t i = 0; i < ap.size(); i++) REQUIRE(bp[i] == Approx(ap[i] + 1.0));
}

TEST_CASE("embedding in float agrees with double at a parallel size", "[ops]") {
  const int b = 4, t = 64, c = 96, v = 256;
  std::vector<std::int32_t> tok(b * t);
  for (int i = 0; i < b * t; i++) tok[i] = (i * 37) % v;
  const auto wte = random_values(v * c, 7), wpe = random_values(t * c, 8),
             dy = random_values(b * t * c, 9);
  std::vector<double> out(b * t * c), dwte(v * c), dwpe(t * c);
  std::vector<float> out_f(b * t * c), dwte_f(v * c), dwpe_f(t * c);
  embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), b, t, c);
  embedding_forward(out_f.data(), tok.data(), to_float(wte).data(), to_float(wpe).data(), b, t, c);
  CHECK(nmse(out_f, out) < 1e-13);
  embedding_backward(dwte.data(), dwpe.data(), dy.data(), tok.data(), b, t, c);
  embedding_backward(dwte_f.data(), dwpe_f.data(), to_float(dy).data(), tok.data(), b, t, c);
  CHECK(nmse(dwte_f, dwte) < 1e-12);
  CHECK(nmse(dwpe_f, dwpe) < 1e-12);
}

TEST_CASE("embedding cost counts both tables and saves the token ids", "[ops]") {
  const layer_cost c = embedding_cost(128, 256, 128, 256, 4);
  CHECK(c.param_bytes == (256 + 128) * 256 * 4);
  CHECK(c.saved_bytes_per_sample == 128 * 4);
  CHECK(c.output_bytes_per_sample == 128 * 256 * 4);
}
