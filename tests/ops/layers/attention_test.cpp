// Tests for causal self-attention: a naive reference (loops, no GEMMs), finite-difference
// gradients for qkv at a tiny size and at one spanning several row blocks, the saved
// probabilities, accumulation (and overwrite as adding into zeros), and float against double.
#include "ops/layers/attention.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

// out (B, T, C) by the definition, one query at a time.
std::vector<double> reference(const std::vector<double>& qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  std::vector<double> out(std::size_t(B) * Tn * C);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < Tn; t++) {
        const double* q = &qkv[(std::size_t(b) * Tn + t) * 3 * C + h * hs];
        std::vector<double> s(t + 1);
        double m = -1e300, z = 0;
        for (int j = 0; j <= t; j++) {
          const double* k = &qkv[(std::size_t(b) * Tn + j) * 3 * C + C + h * hs];
          double d = 0;
          for (int i = 0; i < hs; i++) d += q[i] * k[i];
          s[j] = d / std::sqrt(double(hs));
          m = std::max(m, s[j]);
        }
        for (int j = 0; j <= t; j++) z += std::exp(s[j] - m);
        for (int i = 0; i < hs; i++) {
          double o = 0;
          for (int j = 0; j <= t; j++)
            o += std::exp(s[j] - m) / z *
                 qkv[(std::size_t(b) * Tn + j) * 3 * C + 2 * C + h * hs + i];
          out[(std::size_t(b) * Tn + t) * C + h * hs + i] = o;
        }
      }
  return out;
}

void check_gradients(int B, int Tn, int C, int NH, std::uint64_t seed) {
  auto qkv = random_values(std::int64_t(B) * Tn * 3 * C, seed, -2, 2);
  const auto proj = random_values(std::int64_t(B) * Tn * C, seed + 1);
  std::vector<double> out(proj.size()), att(std::size_t(B) * NH * Tn * Tn);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
    return dot(out, proj);
  };
  loss();
  std::vector<double> dqkv(qkv.size());
  attention_backward(dqkv.data(), proj.data(), qkv.data(), att.data(), B, Tn, C, NH);
  const auto r = gradcheck(loss, qkv.data(), std::int64_t(qkv.size()), dqkv.data());
  INFO("worst element " << r.worst << ": analytic " << r.analytic << " numeric " << r.numeric);
  CHECK(r.max_numeric > 0);
  CHECK(r.max_rel_error < 1e-6);
}

}  // namespace

TEST_CASE("attention forward matches the definition", "[ops]") {
  for (int Tn : {5, 70, 129}) {  // one row block, then several with a ragged last one
    const int B = 2, C = 8, NH = 2;
    const auto qkv = random_values(std::int64_t(B) * Tn * 3 * C, 1, -2, 2);
    std::vector<double> out(std::size_t(B) * Tn * C), att(std::size_t(B) * NH * Tn * Tn, 7.0);
    attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
    const auto want = reference(qkv, B, Tn, C, NH);
    for (std::size_t i = 0; i < out.size(); i++)
      REQUIRE(out[i] == Approx(want[i]).epsilon(1e-12).margin(1e-14));
    // Saved probabilities: rows sum to 1 over the causal part, zero above the diagonal.
    for (int bh = 0; bh < B * NH; bh++)
      for (int t = 0; t < Tn; t++) {
        double s = 0;
        for (int j = 0; j < Tn; j++) {
          const double p = att[(std::size_t(bh) * Tn + t) * Tn + j];
          if (j > t) REQUIRE(p == 0.0);
          s += p;
        }
        REQUIRE(s == Approx(1.0).epsilon(1e-12));
      }
  }
}

TEST_CASE("attention backward matches finite differences", "[ops]") {
  check_gradients(2, 5, 8, 2, 2);
  check_gradients(1, 70, 8, 2, 4);  // spans several row blocks, the last one ragged
}

TEST_CASE("attention backward adds into dqkv", "[ops]") {
  const int B = 2, Tn = 5, C = 8, NH = 2;
  const auto qkv = random_values(B * Tn * 3 * C, 5), dy = random_values(B * Tn * C, 6);
  std::vector<double> out(B * Tn * C), att(B * NH * Tn * Tn);
  attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
  std::vector<double> a(qkv.size()), b(qkv.size(), 1.0);
  attention_backward(a.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
  attention_backward(b.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
  for (std::size_t i = 0; i < a.size(); i++) REQUIRE(b[i] == Approx(a[i] + 1.0));
}

TEST_CASE("attention backward overwrite gives the bits of adding into zeros", "[ops]") {
  const int B = 2, Tn = 70, C = 32, NH = 4;  // several row blocks and (b, h) tasks
  const auto qkv = to_float(random_values(std::int64_t(B) * Tn * 3 * C, 9, -2, 2));
  const auto dy = to_float(random_values(std::int64_t(B) * Tn * C, 10));
  std::vector<float> out(dy.size()), att(std::size_t(B) * NH * Tn * Tn);
  attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
  std::vector<float> added(qkv.size(), 0.0f), over(qkv.size(), std::nanf(""));
  attention_backward(added.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
  attention_backward(over.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH,
                     grad_into::overwrite);
  REQUIRE(std::memcmp(added.data(), over.data(), added.size() * sizeof(float)) == 0);
}

TEST_CASE("attention in float agrees with double", "[ops]") {
  const int B = 2, Tn = 130, C = 32, NH = 4;
  const auto qkv = random_values(std::int64_t(B) * Tn * 3 * C, 7, -2, 2);
  const auto dy = random_values(std::int64_t(B) * Tn * C, 8);
  std::vector<double> out(dy.size()), att(std::size_t(B) * NH * Tn * Tn), dqkv(qkv.size());
  std::vector<float> out_f(dy.size()), att_f(att.size()), dqkv_f(qkv.size());
  const auto qkv_f = to_float(qkv);
  attention_forward(out.data(), att.data(), qkv.data(), B, Tn, C, NH);
  attention_forward(out_f.data(), att_f.data(), qkv_f.data(), B, Tn, C, NH);
  CHECK(nmse(out_f, out) < 1e-11);
  CHECK(nmse(att_f, att) < 1e-11);
  attention_backward(dqkv.data(), dy.data(), qkv.data(), att.data(), B, Tn, C, NH);
  attention_backward(dqkv_f.data(), to_float(dy).data(), qkv_f.data(), att_f.data(), B, Tn, C, NH);
  CHECK(nmse(dqkv_f, dqkv) < 1e-10);
}

TEST_CASE("attention cost saves qkv and the probabilities", "[ops]") {
  const layer_cost c = attention_cost(128, 256, 4, 4);
  CHECK(c.param_bytes == 0);
  CHECK(c.saved_bytes_per_sample == (3 * 128 * 256 + 4 * 128 * 128) * 4);
  CHECK(c.output_bytes_per_sample == 128 * 256 * 4);
  // At least the causal half of the two T x T x C products, at most the full square.
  CHECK(c.flops_per_sample >= 2LL * 128 * 129 * 256);
  CHECK(c.flops_per_sample <= 4LL * 128 * 128 * 256 + 5LL * 4 * 128 * 128);
}
