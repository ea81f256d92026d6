// Tests for ops/optim/adamw: decoupled weight decay and bias correction, against a plain formula,
// against torch.optim.AdamW, and the TBB-parallel path against the serial one.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ops/optim/optimizer.hpp"
#include "optim_problem.hpp"

using namespace pipeworks;
using namespace pipeworks::optim_test;

TEST_CASE("adamw_update matches the AdamW formula step by step", "[ops][optim]") {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  std::vector<double> w = w0, m(5, 0.0), v(5, 0.0), g(5);
  std::vector<double> rw = w0, rm(5, 0.0), rv(5, 0.0);
  for (int t = 1; t <= 4; ++t) {
    for (std::size_t i = 0; i < 5; ++i) g[i] = grad(w[i], i, t - 1);
    adamw_update<double>(w, w, g, m, v, t, lr, b1, b2, eps, wd);
    for (std::size_t i = 0; i < 5; ++i) {
      rw[i] -= lr * wd * rw[i];
      rm[i] = b1 * rm[i] + (1 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
      const double mhat = rm[i] / (1 - std::pow(b1, t)), vhat = rv[i] / (1 - std::pow(b2, t));
      rw[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      REQUIRE(w[i] == Approx(rw[i]).epsilon(1e-13));
    }
  }
}

TEST_CASE("adamw matches torch.optim.AdamW over five steps", "[ops][optim]") {
  // Made once with torch 1.13 (Debian python3-torch) in float64:
  //   opt = AdamW([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
  //   for k in range(5): p.grad = 2*(p - c) + 0.01*(k+1)*(i-2); opt.step()
  const std::vector<double> torch_w = {0.44792059783026, -1.1938814566722205, 1.940143201880059,
                                       0.04969170538301558, -0.6969948335653344};
  optimizer_config cfg;
  cfg.kind = optimizer_kind::adamw;
  cfg.lr = 0.01;
  cfg.weight_decay = 0.1;
  std::vector<double> w = w0, g(5), next(5);
  std::vector<float> wf(w0.begin(), w0.end()), gf(5);
  optimizer_state<double> st;
  optimizer_state<float> stf;
  for (int k = 0; k < 5; ++k) {
    for (std::size_t i = 0; i < 5; ++i) g[i] = grad(w[i], i, k);
    for (std::size_t i = 0; i < 5; ++i) gf[i] = static_cast<float>(grad(wf[i], i, k));
    const std::vector<double> old = w;
    REQUIRE(optimizer_step<double>(cfg, cfg.lr, w, g, st, next).ok());
    REQUIRE(w == old);  // the old version is untouched: a new snapshot is written
    w = next;
    REQUIRE(optimizer_step<float>(cfg, cfg.lr, wf, gf, stf, wf).ok());
  }
  REQUIRE(st.step == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    REQUIRE(w[i] == Approx(torch_w[i]).epsilon(1e-13));
    REQUIRE(wf[i] == Approx(torch_w[i]).margin(1e-6));
  }
}

TEST_CASE("adamw on a large array splits across threads with the same result", "[ops][optim]") {
  const std::size_t n = (std::size_t{1} << 17) + 3;  // above the parallel threshold, ragged end
  std::vector<float> w(n), g(n), m(n, 0.1f), v(n, 0.01f), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = std::sin(static_cast<float>(i));
    g[i] = std::cos(static_cast<float>(i) * 0.5f);
  }
  std::vector<float> m2 = m, v2 = v, out2(n);
  adamw_update<float>(out, w, g, m, v, 3, 1e-3, 0.9, 0.95, 1e-8, 0.1);
  // The serial reference: one small call per element never takes the parallel path.
  for (std::size_t i = 0; i < n; ++i)
    adamw_update<float>({&out2[i], 1}, {&w[i], 1}, {&g[i], 1}, {&m2[i], 1}, {&v2[i], 1}, 3, 1e-3,
                        0.9, 0.95, 1e-8, 0.1);
  REQUIRE(out == out2);
  REQUIRE(m == m2);
  REQUIRE(v == v2);
}
