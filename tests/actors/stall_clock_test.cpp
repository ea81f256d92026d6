// Tests for actors/stall_clock.hpp's seam: a stop injected with pretend_stopped is what every
// later query sees, ending at the query, so tests of the driver's own stop never race a sleep.
#include "actors/stall_clock.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace pipeworks;
using namespace std::chrono_literals;

TEST_CASE("a stop injected into the stall clock is seen by every later query", "[actors]") {
  stall_clock c;
  c.pretend_stopped(5s);
  for (int i = 0; i < 2; ++i) {
    const auto before = stall_clock::clock::now();
    const stall_clock::gap g = c.longest_recent(12s);
    const auto after = stall_clock::clock::now();
    CHECK(g.length() >= 5s);  // at least the stop; a real one of the test's own may be longer
    CHECK(g.to >= before);    // it ended at the query
    CHECK(g.to <= after);
  }
}
