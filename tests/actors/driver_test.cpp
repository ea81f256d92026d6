// Tests for the driver: step metrics and weight snapshots per step, and stop_requested ending a
// run cleanly with the latest complete weights.
#include "actors/driver.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "tests/actors/fixtures.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

TEST_CASE("every step reports its metrics and then its weights", "[actors]") {
  const model<float> net = small_mlp();
  pipeline_options o = one_f_one_b(2, 2, 3);
  std::vector<std::int64_t> order;  // +step for on_step, -step for on_weights
  std::shared_ptr<const model_weights> last;
  auto r = train_pipeline<float>(
      net, net.init_params(2), o, synthetic_data(),
      [&](const step_metrics& s) {
        order.push_back(s.step);
        CHECK(s.lr == Approx(0.05));
        CHECK(s.step_s >= 0);
        CHECK(s.elapsed_s >= s.step_s);
      },
      [&](std::shared_ptr<const model_weights> w) {
        order.push_back(-static_cast<std::int64_t>(order.size() + 1) / 2);
        REQUIRE(w->size() == 2);
        last = std::move(w);
      });
  REQUIRE(r.ok());
  CHECK(order == std::vector<std::int64_t>{1, -1, 2, -2, 3, -3});
  REQUIRE(last);
  CHECK((*last)[0] == r->weights[0]);
  CHECK((*last)[1] == r->weights[1]);
  CHECK(r->last.step == 3);
}

TEST_CASE("stop_requested ends the run cleanly with the latest weights", "[actors]") {
  const model<float> net = small_mlp();
  pipeline_options o = one_f_one_b(2, 2, 200);
  std::atomic<bool> stop{false};
  o.stop_requested = [&] { return stop.load(); };
  std::shared_ptr<const model_weights> last;
  auto slow = [](std::int64_t t) -> result<minibatch> {
    if (t >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return synthetic_minibatch(t);
  };
  auto r = train_pipeline<float>(
      net, net.init_params(2), o, slow,
      [&](const step_metrics& s) {
        if (s.step == 1) stop = true;
      },
      [&](std::shared_ptr<const model_weights> w) { last = std::move(w); });
  REQUIRE(r.ok());
  CHECK(r->interrupted);
  CHECK(r->steps_done >= 1);
  CHECK(r->steps_done < 200);
  CHECK(r->last.step == r->steps_done);
  REQUIRE(last);
  REQUIRE(r->weights.size() == 2);
  CHECK(r->weights[0] == (*last)[0]);
  CHECK(r->weights[1] == (*last)[1]);
}
