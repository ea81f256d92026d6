// Tests for gradient_reducer: the sum is added in replica order whatever the arrival order,
// every replica gets its own copy, and duplicates, strangers and odd layouts are refused.
#include "runtime/exec/reducer.hpp"

#include <catch2/catch.hpp>
#include <cstring>

#include "tests/ops/cuda/gpu_test_util.hpp"

using namespace pipeworks;

namespace {

template <class T>
std::shared_ptr<const param_set> grads(std::vector<T> v) {
  param_set p({{{"w", {static_cast<std::int64_t>(v.size())}}}}, 0, dtype_of<T>());
  std::copy(v.begin(), v.end(), p.values<T>().begin());
  return std::make_shared<const param_set>(std::move(p));
}

reduce_request req(int replica, int step, std::shared_ptr<const param_set> g, int stage = 1) {
  return reduce_request{stage, replica, step, std::move(g)};
}

}  // namespace

TEST_CASE("the reducer answers once every replica's gradient is in", "[runtime]") {
  gradient_reducer red(1, 3);
  auto a = red.add(req(2, 0, grads<double>({1, 2})));
  REQUIRE(a.ok());
  REQUIRE_FALSE(a->has_value());
  auto b = red.add(req(0, 0, grads<double>({10, 20})));
  REQUIRE(b.ok());
  REQUIRE_FALSE(b->has_value());
  REQUIRE(red.pending_steps() == 1);
  auto c = red.add(req(1, 0, grads<double>({100, 200})));
  REQUIRE(c.ok());
  REQUIRE(c->has_value());
  const auto& out = **c;
  REQUIRE(out.size() == 3);
  for (const auto& r : out) {
    REQUIRE(r.stage == 1);
    REQUIRE(r.step == 0);
    REQUIRE(r.sum->values<double>()[0] == 111);
    REQUIRE(r.sum->values<double>()[1] == 222);
  }
  // One read-only sum for every replica (each copies it before clipping).
  REQUIRE(out[0].sum == out[1].sum);
  REQUIRE(out[1].sum == out[2].sum);
  REQUIRE(red.pending_steps() == 0);
}

TEST_CASE("the reducer's sum does not depend on arrival order", "[runtime]") {
  // Values whose float sum depends on the order: (1e8 + 1) - 1e8 = 0 but (1e8 - 1e8) + 1 = 1.
  const std::vector<std::vector<float>> g = {{1e8f}, {1.f}, {-1e8f}};
  const float in_order = (1e8f + 1.f) + -1e8f;
  for (std::vector<int> order : {std::vector<int>{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}}) {
    gradient_reducer red(0, 3);
    std::optional<std::vector<reduce_result>> done;
    for (int r : order) {
      auto x = red.add(req(r, 4, grads<float>(g[r]), 0));
      REQUIRE(x.ok());
      if (x->has_value()) done = std::move(**x);
    }
    REQUIRE(done);
    for (const auto& res : *done) REQUIRE(res.sum->values<float>()[0] == in_order);
  }
}

TEST_CASE("the reducer keeps steps apart", "[runtime]") {
  gradient_reducer red(0, 2);
  REQUIRE_FALSE(red.add(req(0, 0, grads<float>({1}), 0))->has_value());
  REQUIRE_FALSE(red.add(req(0, 1, grads<float>({5}), 0))->has_value());
  REQUIRE(red.pending_steps() == 2);
  auto s1 = red.add(req(1, 1, grads<float>({6}), 0));
  REQUIRE(s1.ok());
  REQUIRE(s1->has_value());
  REQUIRE((**s1)[0].step == 1);
  REQUIRE((**s1)[0].sum->values<float>()[0] == 11);
  auto s0 = red.add(req(1, 0, grads<float>({2}), 0));
  REQUIRE(s0->has_value());
  REQUIRE((**s0)[1].sum->values<float>()[0] == 3);
}

TEST_CASE("one replica gets its own gradient back", "[runtime]") {
  gradient_reducer red(2, 1);
  auto g = grads<double>({3, 4});
  auto r = red.add(req(0, 0, g, 2));
  REQUIRE(r.ok());
  REQUIRE(r->has_value());
  REQUIRE((**r).size() == 1);
  REQUIRE((**r)[0].sum->values<double>()[1] == 4);
  REQUIRE((**r)[0].sum.get() != g.get());
}

TEST_CASE("the reducer refuses duplicates, strangers and other layouts", "[runtime]") {
  gradient_reducer red(1, 2);
  REQUIRE(red.add(req(0, 0, grads<double>({1, 2}))).ok());
  auto twice = red.add(req(0, 0, grads<double>({1, 2})));
  REQUIRE_FALSE(twice.ok());
  REQUIRE_THAT(twice.message(), Catch::Contains("replica 0") && Catch::Contains("twice"));
  auto range = red.add(req(2, 0, grads<double>({1, 2})));
  REQUIRE_FALSE(range.ok());
  REQUIRE_THAT(range.message(), Catch::Contains("outside 0..1"));
  REQUIRE_FALSE(red.add(req(-1, 0, grads<double>({1, 2}))).ok());
  auto longer = red.add(req(1, 0, grads<double>({1, 2, 3})));
  REQUIRE_FALSE(longer.ok());
  REQUIRE_THAT(longer.message(), Catch::Contains("different layout"));
  auto other_type = red.add(req(1, 0, grads<float>({1, 2})));
  REQUIRE_FALSE(other_type.ok());
  auto wrong_stage = red.add(req(1, 0, grads<double>({1, 2}), 3));
  REQUIRE_FALSE(wrong_stage.ok());
  REQUIRE_THAT(wrong_stage.message(), Catch::Contains("stage 3"));
  REQUIRE_FALSE(red.add(req(1, 0, nullptr)).ok());
  // After all that, the right gradient still completes the step.
  auto fine = red.add(req(1, 0, grads<double>({5, 6})));
  REQUIRE(fine.ok());
  REQUIRE(fine->has_value());
  REQUIRE((**fine)[0].sum->values<double>()[1] == 8);
}

// The p2p reduce in one process: the chain's partial sum grows in replica order whatever the
// arrival order, only the last replica gets the sum, and it holds at most the partial sum and the
// gradients that came before their turn.
TEST_CASE("the p2p reducer sums in replica order and answers the last replica alone",
          "[runtime]") {
  const std::vector<std::vector<int>> orders{{0, 1, 2, 3}, {3, 1, 0, 2}, {2, 3, 1, 0}};
  for (const auto& order : orders) {
    gradient_reducer red(1, 4, reduce_mode::p2p);
    // Values whose float sum depends on the order: (1e8 + 1) - 1e8 + 1 is 1 left to right.
    const std::vector<float> v{1e8f, 1.0f, -1e8f, 1.0f};
    std::optional<std::vector<reduce_result>> out;
    for (std::size_t i = 0; i < order.size(); ++i) {
      auto got = red.add(req(order[i], 0, grads<float>({v[static_cast<std::size_t>(order[i])]})));
      REQUIRE(got.ok());
      CHECK(got->has_value() == (i + 1 == order.size()));
      if (*got) out = std::move(**got);
    }
    REQUIRE(out);
    REQUIRE(out->size() == 4);
    for (int r = 0; r < 3; ++r) CHECK_FALSE((*out)[static_cast<std::size_t>(r)].sum);
    REQUIRE((*out)[3].sum);
    CHECK((*out)[3].sum->values<float>()[0] == ((1e8f + 1.0f) + -1e8f) + 1.0f);
    CHECK(red.pending_steps() == 0);
  }
}

TEST_CASE("the p2p reducer holds two gradients in order where the collective holds all",
          "[runtime]") {
  const std::int64_t g = static_cast<std::int64_t>(grads<float>({1, 2, 3, 4})->nbytes());
  gradient_reducer chain(0, 4, reduce_mode::p2p), all(0, 4);
  for (int r = 0; r < 4; ++r) {
    REQUIRE(chain.add(req(r, 0, grads<float>({1, 2, 3, 4}), 0)).ok());
    REQUIRE(all.add(req(r, 0, grads<float>({1, 2, 3, 4}), 0)).ok());
  }
  CHECK(chain.peak_bytes() == 2 * g);  // the partial sum and the gradient being added
  CHECK(all.peak_bytes() == 5 * g);    // every replica's gradient and the sum
}

TEST_CASE("the p2p reducer hands the last replica's version to the others only", "[runtime]") {
  gradient_reducer red(1, 3, reduce_mode::p2p);
  auto v = grads<double>({5, 6});
  reduce_request from_last{1, 2, 0, v, reduce_kind::weights};
  auto got = red.add(from_last);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  const auto& out = **got;
  REQUIRE(out.size() == 3);
  CHECK(out[0].sum == v);
  CHECK(out[1].sum == v);
  CHECK(out[0].kind == reduce_kind::weights);
  CHECK_FALSE(out[2].sum);
  reduce_request from_first{1, 0, 1, v, reduce_kind::weights};
  auto refused = red.add(from_first);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("only the last replica") != std::string::npos);
  // A gradient twice is refused, before or after its turn.
  REQUIRE(red.add(req(1, 4, grads<double>({1, 1}))).ok());
  CHECK_FALSE(red.add(req(1, 4, grads<double>({1, 1}))).ok());
  REQUIRE(red.add(req(0, 4, grads<double>({1, 1}))).ok());
  CHECK_FALSE(red.add(req(0, 4, grads<double>({1, 1}))).ok());
}

TEST_CASE("a GPU reducer sums GPU gradients to the host's bits in replica order", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  constexpr int w = 3;
  const std::size_t n = 100003;
  std::vector<std::shared_ptr<const param_set>> host;
  for (int r = 0; r < w; ++r) host.push_back(grads<float>(cuda_test::random_floats(n, 40 + r)));
  // Each replica's gradient made on a stream of its own and handed over, as a rank sends it.
  std::vector<device_context> replicas;
  for (int r = 0; r < w; ++r) replicas.push_back(device_context::cuda(0));
  gradient_reducer on_gpu(1, w, reduce_mode::collective, device{device_kind::cuda, 0});
  gradient_reducer on_host(1, w);
  std::optional<std::vector<reduce_result>> gpu_sums, host_sums;
  for (int r : {2, 0, 1}) {  // out of order: the sum is still 0 + 1 + 2
    param_set g = host[static_cast<std::size_t>(r)]->on(replicas[static_cast<std::size_t>(r)]);
    replicas[static_cast<std::size_t>(r)].hand_over(g.arena());
    auto a = on_gpu.add(req(r, 0, std::make_shared<const param_set>(std::move(g))));
    REQUIRE(a.ok());
    if (*a) gpu_sums = std::move(**a);
    auto b = on_host.add(req(r, 0, host[static_cast<std::size_t>(r)]));
    REQUIRE(b.ok());
    if (*b) host_sums = std::move(**b);
  }
  REQUIRE(gpu_sums);
  REQUIRE(host_sums);
  REQUIRE(gpu_sums->at(0).sum->where().kind == device_kind::cuda);
  const std::span<const float> want = host_sums->at(0).sum->values<float>();
  for (int r = 0; r < w; ++r) {  // each replica's own copy, on its stream
    const param_set mine = gpu_sums->at(static_cast<std::size_t>(r)).sum->on(replicas[static_cast<std::size_t>(r)]);
    const param_set back = mine.on(host_context());
    CHECK(std::memcmp(back.values<float>().data(), want.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("a reducer without a GPU refuses a GPU gradient by name", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  const device_context gpu = device_context::cuda(0);
  gradient_reducer red(1, 2);
  auto got = red.add(req(0, 0, std::make_shared<const param_set>(grads<float>({1, 2})->on(gpu))));
  REQUIRE_FALSE(got.ok());
  CHECK(got.message().find("cuda:0") != std::string::npos);
  CHECK(got.message().find("host copy") != std::string::npos);
}
