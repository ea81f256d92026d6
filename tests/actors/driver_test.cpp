// Tests for the driver: step metrics, and weight snapshots at the interval the caller subscribes
// to (else none until the end), and stop_requested ending a run cleanly with every stage's
// latest weights.
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
  run_plan o = one_f_one_b(2, 2, 3);
  o.weights_every = 1;
  std::vector<std::int64_t> order;  // +step for on_step, -step for on_weights
  std::shared_ptr<const model_weights> last;
  pipeline_callbacks cb;
  cb.on_step = [&](const step_metrics& s) {
    order.push_back(s.step);
    CHECK(s.lr == Approx(0.05));
    CHECK(s.step_s >= 0);
    CHECK(s.elapsed_s >= s.step_s);
  };
  cb.on_weights = [&](std::shared_ptr<const model_weights> w) {
    order.push_back(-static_cast<std::int64_t>(order.size() + 1) / 2);
    REQUIRE(w->size() == 2);
    last = std::move(w);
  };
  auto r = train_pipeline<float>(net, net.init_params(2), o, synthetic_data(), cb);
  REQUIRE(r.ok());
  CHECK(order == std::vector<std::int64_t>{1, -1, 2, -2, 3, -3});
  REQUIRE(last);
  CHECK((*last)[0] == r->weights[0]);
  CHECK((*last)[1] == r->weights[1]);
  CHECK(r->last.step == 3);
}

TEST_CASE("weights reach the caller at the subscribed interval and at the end only", "[actors]") {
  const model<float> net = small_mlp();
  for (std::int64_t every : {0, 2}) {
    CAPTURE(every);
    run_plan o = one_f_one_b(2, 2, 5);
    o.weights_every = every;
    std::vector<std::int64_t> published;
    std::int64_t steps = 0;
    pipeline_callbacks cb;
    cb.on_step = [&](const step_metrics& s) { steps = s.step; };
    cb.on_weights = [&](std::shared_ptr<const model_weights>) { published.push_back(steps); };
    auto r = train_pipeline<float>(net, net.init_params(2), o, synthetic_data(), cb);
    REQUIRE(r.ok());
    CHECK(published == (every == 0 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{2, 4, 5}));
    REQUIRE(r->weights.size() == 2);  // the final weights come back at the end either way
    CHECK(r->weight_steps == std::vector<int>{5, 5});
  }
}

TEST_CASE("stop_requested ends the run cleanly with every stage's latest weights", "[actors]") {
  // Every minibatch after the second takes at least 20 ms, so the run cannot end on its own in
  // under a minute: the stop (polled every 50 ms) ends it, however slow or busy the machine.
  const std::int64_t steps = 3000;
  const model<float> net = small_mlp();
  run_plan o = one_f_one_b(2, 2, steps);
  o.weights_every = 1;
  std::atomic<bool> stop{false};
  std::shared_ptr<const model_weights> last;
  auto slow = [](std::int64_t t) -> result<minibatch> {
    if (t >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return synthetic_minibatch(t);
  };
  pipeline_callbacks cb;
  cb.on_step = [&](const step_metrics& s) {
    if (s.step == 1) stop = true;
  };
  cb.on_weights = [&](std::shared_ptr<const model_weights> w) { last = std::move(w); };
  cb.stop_requested = [&] { return stop.load(); };
  auto r = train_pipeline<float>(net, net.init_params(2), o, slow, cb);
  REQUIRE(r.ok());
  CHECK(r->interrupted);
  CHECK(r->steps_done >= 1);
  CHECK(r->steps_done < steps);
  CHECK(r->last.step == r->steps_done);
  REQUIRE(last);
  REQUIRE(r->weights.size() == 2);
  REQUIRE(r->weight_steps.size() == 2);
  for (int s = 0; s < 2; ++s) {
    // A stage may be a step ahead of the last step every stage completed.
    CHECK(r->weight_steps[s] >= r->steps_done);
    CHECK(r->weight_steps[s] <= r->steps_done + 1);
    if (r->weight_steps[s] == r->steps_done) CHECK(r->weights[s] == (*last)[s]);
  }
}
