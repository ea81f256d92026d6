// Tests for base/cpu_count.hpp: the cgroup v2 cpu.max parser and usable_cores' bounds.
#include "base/cpu_count.hpp"

#include <sched.h>

#include <catch2/catch.hpp>

using namespace pipeworks;

TEST_CASE("cpu_max_cores rounds a quota up and reads max as no limit", "[base]") {
  CHECK(cpu_max_cores("max 100000") == std::nullopt);
  CHECK(cpu_max_cores("200000 100000") == 2);
  CHECK(cpu_max_cores("150000 100000\n") == 2);
  CHECK(cpu_max_cores("50000 100000") == 1);
  CHECK(cpu_max_cores("1 100000") == 1);
  CHECK(cpu_max_cores("") == std::nullopt);
  CHECK(cpu_max_cores("abc 100000") == std::nullopt);
  CHECK(cpu_max_cores("100000 0") == std::nullopt);
}

TEST_CASE("usable_cores is at least 1 and at most the affinity mask", "[base]") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const int cores = usable_cores();
  CHECK(cores >= 1);
  CHECK(cores <= CPU_COUNT(&set));
}

TEST_CASE("usable_cores follows a narrowed affinity mask", "[base]") {
  cpu_set_t before;
  CPU_ZERO(&before);
  REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &before)) first = c;
  REQUIRE(first >= 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int cores = usable_cores();
  REQUIRE(sched_setaffinity(0, sizeof before, &before) == 0);
  CHECK(cores == 1);
}
