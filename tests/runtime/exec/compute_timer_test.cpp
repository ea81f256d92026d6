// runtime/exec/compute_timer: a throttled rank's default sleep ends at once when this process's
// throttled sleeps are cut (a run stopping or ending), and sleeps again once they are allowed.
#include <catch2/catch.hpp>
#include <future>

#include "runtime/exec/compute_timer.hpp"

using namespace pipeworks;

TEST_CASE("a throttled sleep of an hour ends at once when throttled sleeps are cut", "[runtime]") {
  cut_throttled_sleeps(true);
  CHECK(throttled_sleep(3600));  // cut already: returns at once, cut short
  cut_throttled_sleeps(false);
  CHECK_FALSE(throttled_sleep(0.001));  // allowed again: sleeps its whole (short) stretch
  // A sleeper already asleep is woken by the cut (without it, this test would outlast ctest's
  // timeout by the hour).
  auto sleeper = std::async(std::launch::async, [] { return throttled_sleep(3600); });
  cut_throttled_sleeps(true);
  CHECK(sleeper.get());
  cut_throttled_sleeps(false);
}

TEST_CASE("a throttled compute timer sleeps through throttled_sleep unless a sleep is injected", "[runtime]") {
  cut_throttled_sleeps(true);  // so that the stretch below is cut at once
  double cpu = 0;
  compute_timer timer(1e-6, {}, false, [&] { return cpu; }, {});
  const double t0 = timer.begin();
  cpu += 1.0;  // an action of one CPU second: a stretch of about 11.6 days at speed 1e-6
  CHECK(timer.end(t0) >= t0);
  cut_throttled_sleeps(false);
}
