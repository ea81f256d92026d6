// runtime/exec/compute_timer: a run's throttle_sleeps end at once when the run cuts them (it
// stops or ends), and a throttled compute timer sleeps through the sleep it is given.
#include <catch2/catch.hpp>
#include <future>

#include "runtime/exec/compute_timer.hpp"

using namespace pipeworks;

TEST_CASE("a throttled sleep of an hour ends at once when its run cuts its sleeps", "[runtime]") {
  throttle_sleeps run;
  CHECK_FALSE(run.sleep(0.001));  // not cut: sleeps its whole (short) stretch
  // A sleeper already asleep is woken by the cut (without it, this test would outlast ctest's
  // timeout by the hour), and a later sleep returns at once.
  auto sleeper = std::async(std::launch::async, [&] { return run.sleep(3600); });
  run.cut();
  CHECK(sleeper.get());
  CHECK(run.sleep(3600));
  // Another run's sleeps are its own.
  throttle_sleeps other;
  CHECK_FALSE(other.sleep(0.001));
}

TEST_CASE("a throttled compute timer sleeps through the sleep it is given", "[runtime]") {
  throttle_sleeps run;
  run.cut();  // so that the stretch below ends at once
  int slept = 0;
  double cpu = 0;
  compute_timer timer(1e-6, {}, false, [&] { return cpu; }, [&](double s) {
    ++slept;
    run.sleep(s);
  });
  const double t0 = timer.begin();
  cpu += 1.0;  // an action of one CPU second: a stretch of about 11.6 days at speed 1e-6
  CHECK(timer.end(t0) >= t0);
  CHECK(slept == 1);
}
