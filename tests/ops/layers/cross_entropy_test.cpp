// Tests for softmax cross-entropy: the loss against log-softmax by definition, stability for
// huge logits, finite-difference gradients, accumulation, and float against double.
#include "ops/layers/cross_entropy.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr std::int64_t N = 6;
constexpr int V = 9;
const std::vector<std::int32_t> targets = {0, 8, 3, 3, 5, 1};

}  // namespace

TEST_CASE("cross-entropy forward is the mean negative log-softmax of the target", "[ops]") {
  const auto logits = random_values(N * V, 1, -3, 3);
  std::vector<double> probs(N * V);
  const double loss = cross_entropy_forward(probs.data(), logits.data(), targets.data(), N, V);
  double want = 0;
  for (int n = 0; n < N; n++) {
    double z = 0;
    for (int v = 0; v < V; v++) z += std::exp(logits[n * V + v]);
    want -= std::log(std::exp(logits[n * V + targets[n]]) / z) / N;
    for (int v = 0; v < V; v++)
      REQUIRE(probs[n * V + v] == Approx(std::exp(logits[n * V + v]) / z));
  }
  CHECK(loss == Approx(want).epsilon(1e-12));
}

TEST_CASE("cross-entropy is stable for huge logits", "[ops]") {
  std::vector<float> logits(V, 0.0f), probs(V);
  logits[2] = 1e4f;
  const std::int32_t t2 = 2, t0 = 0;
  CHECK(cross_entropy_forward(probs.data(), logits.data(), &t2, 1, V) == Approx(0.0).margin(1e-6));
  CHECK(cross_entropy_forward(probs.data(), logits.data(), &t0, 1, V) == Approx(1e4).epsilon(1e-6));
  CHECK(std::isfinite(probs[0]));
}

TEST_CASE("cross-entropy backward matches finite differences", "[ops]") {
  auto logits = random_values(N * V, 2, -3, 3);
  std::vector<double> probs(N * V);
  const double dloss = 0.7;
  auto loss = [&] {
    return dloss * cross_entropy_forward(probs.data(), logits.data(), targets.data(), N, V);
  };
  loss();
  std::vector<double> dlogits(N * V);
  cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), dloss, N, V);
  CHECK(gradcheck(loss, logits.data(), N * V, dlogits.data()).max_rel_error < 1e-6);
}

TEST_CASE("cross-entropy backward adds into dlogits", "[ops]") {
  const auto logits = random_values(N * V, 3);
  std::vector<double> probs(N * V), a(N * V), b(N * V, 1.0);
  (void)cross_entropy_forward(probs.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward(a.data(), probs.data(), targets.data(), 1.0, N, V);
  cross_entropy_backward(b.data(), probs.data(), targets.data(), 1.0, N, V);
  for (std::size_t i = 0; i < a.size(); i++) REQUIRE(b[i] == Approx(a[i] + 1.0));
}

TEST_CASE("cross-entropy in float agrees with double across parallel chunks", "[ops]") {
  const std::int64_t n = 1000;
  const int v = 256;
  const auto logits = random_values(n * v, 4, -8, 8);
  std::vector<std::int32_t> t(n);
  for (int i = 0; i < n; i++) t[i] = (i * 31) % v;
  std::vector<double> probs(n * v), d(n * v);
  std::vector<float> probs_f(n * v), d_f(n * v);
  const double loss = cross_entropy_forward(probs.data(), logits.data(), t.data(), n, v);
  const float loss_f =
      cross_entropy_forward(probs_f.data(), to_float(logits).data(), t.data(), n, v);
  CHECK(loss_f == Approx(loss).epsilon(1e-6));
  CHECK(nmse(probs_f, probs) < 1e-12);
  cross_entropy_backward(d.data(), probs.data(), t.data(), 1.0, n, v);
  cross_entropy_backward(d_f.data(), probs_f.data(), t.data(), 1.0f, n, v);
  CHECK(nmse(d_f, d) < 1e-12);
}

TEST_CASE("cross-entropy cost saves the probabilities", "[ops]") {
  const layer_cost c = cross_entropy_cost(128, 256, 4);
  CHECK(c.param_bytes == 0);
  CHECK(c.saved_bytes_per_sample == 128 * 256 * 4 + 128 * 4);
  CHECK(c.flops_per_sample > 0);
}

TEST_CASE("cross-entropy rejects a target outside the vocabulary, naming it", "[ops]") {
  std::vector<double> logits(2 * V), probs(2 * V);
  const std::vector<std::int32_t> bad = {1, V};
  CHECK_THROWS_WITH(cross_entropy_forward(probs.data(), logits.data(), bad.data(), 2, V),
                    Catch::Contains("target 9 at position 1"));
}
