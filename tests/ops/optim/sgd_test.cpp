// Tests for ops/optim/sgd: PyTorch's momentum SGD with weight decay, against a plain formula and
// against torch.optim.SGD.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ops/optim/optimizer.hpp"
#include "optim_problem.hpp"

using namespace pipeworks;
using namespace pipeworks::optim_test;

TEST_CASE("sgd_update matches the momentum formula step by step", "[ops][optim]") {
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  std::vector<double> w = w0, vel(5, 0.0), ref = w0, ref_v(5, 0.0), g(5);
  for (int k = 0; k < 4; ++k) {
    for (std::size_t i = 0; i < 5; ++i) g[i] = grad(w[i], i, k);
    std::vector<double> out(5);
    sgd_update<double>(out, w, g, vel, lr, mu, wd);
    for (std::size_t i = 0; i < 5; ++i) {
      ref_v[i] = mu * ref_v[i] + g[i] + wd * ref[i];
      ref[i] -= lr * ref_v[i];
      REQUIRE(out[i] == Approx(ref[i]).epsilon(1e-13));
      REQUIRE(vel[i] == Approx(ref_v[i]).epsilon(1e-13));
    }
    w = out;
  }
}

TEST_CASE("sgd matches torch.optim.SGD over five steps", "[ops][optim]") {
  // Made once with torch 1.13 (Debian python3-torch) in float64:
  //   p = Parameter(tensor(w0)); opt = SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
  //   for k in range(5): p.grad = 2*(p - c) + 0.01*(k+1)*(i-2); opt.step()
  const std::vector<double> torch_w = {-0.0887770562797785, 1.0679570215847425,
                                       -1.6407349742768622, 0.6076335827448791,
                                       -0.3956642110032012};
  optimizer_config cfg = default_optimizer_config(optimizer_kind::sgd);
  cfg.lr = 0.1;
  cfg.momentum = 0.9;
  cfg.weight_decay = 0.01;
  std::vector<double> w = w0, g(5);
  std::vector<float> wf(w0.begin(), w0.end()), gf(5);
  optimizer_state<double> st;
  optimizer_state<float> stf;
  for (int k = 0; k < 5; ++k) {
    for (std::size_t i = 0; i < 5; ++i) g[i] = grad(w[i], i, k);
    for (std::size_t i = 0; i < 5; ++i) gf[i] = static_cast<float>(grad(wf[i], i, k));
    REQUIRE(optimizer_step<double>(cfg, cfg.lr, w, g, st, w).ok());  // in place: w_out aliases w
    REQUIRE(optimizer_step<float>(cfg, cfg.lr, wf, gf, stf, wf).ok());
  }
  REQUIRE(st.step == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    REQUIRE(w[i] == Approx(torch_w[i]).epsilon(1e-13));
    REQUIRE(wf[i] == Approx(torch_w[i]).margin(2e-6));
  }
}

TEST_CASE("sgd_update leaves the old weights alone when writing new ones", "[ops][optim]") {
  const std::vector<float> w = {1.0f, 2.0f};
  const std::vector<float> g = {0.5f, -0.5f};
  std::vector<float> vel(2, 0.0f), out(2);
  sgd_update<float>(out, w, g, vel, 0.1, 0.0, 0.0);
  REQUIRE(w == std::vector<float>{1.0f, 2.0f});
  REQUIRE(out[0] == Approx(0.95f));
  REQUIRE(out[1] == Approx(2.05f));
}

TEST_CASE("sgd on a large array splits across threads with the same result", "[ops][optim]") {
  const std::size_t n = (std::size_t{1} << 17) + 5;
  std::vector<float> w(n), g(n), vel(n, 0.2f), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = std::sin(static_cast<float>(i));
    g[i] = std::cos(static_cast<float>(i) * 0.5f);
  }
  std::vector<float> vel2 = vel, out2(n);
  sgd_update<float>(out, w, g, vel, 0.05, 0.9, 1e-4);
  for (std::size_t i = 0; i < n; ++i)
    sgd_update<float>({&out2[i], 1}, {&w[i], 1}, {&g[i], 1}, {&vel2[i], 1}, 0.05, 0.9, 1e-4);
  REQUIRE(out == out2);
  REQUIRE(vel == vel2);
}
