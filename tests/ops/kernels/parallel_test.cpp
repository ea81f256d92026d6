// Tests for the oneTBB helpers: every index visited once, small inputs on the calling thread,
// and sums that come out bit-identical on one thread and on two.
#include "ops/kernels/parallel.hpp"

#include <tbb/global_control.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

using namespace pipeworks;

TEST_CASE("parallel_for covers every index exactly once", "[ops]") {
  for (std::int64_t n : {0, 1, 7, 1000, 100001}) {
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
    parallel_for(n, 64, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; i++) seen[i]++;
    });
    for (auto& s : seen) REQUIRE(s.load() == 1);
  }
}

TEST_CASE("parallel_for runs inputs up to the grain on the calling thread", "[ops]") {
  const auto me = std::this_thread::get_id();
  int calls = 0;
  parallel_for(100, 100, [&](std::int64_t lo, std::int64_t hi) {
    CHECK(std::this_thread::get_id() == me);
    CHECK(lo == 0);
    CHECK(hi == 100);
    calls++;
  });
  CHECK(calls == 1);
}

TEST_CASE("parallel_sum is the same to the bit on one and two threads", "[ops]") {
  std::vector<float> x(100000);
  for (std::size_t i = 0; i < x.size(); i++) x[i] = 1.0f / float(i + 1);
  auto sum = [&] {
    return parallel_sum<float>(std::int64_t(x.size()), 1000, [&](std::int64_t lo, std::int64_t hi) {
      float s = 0;
      for (std::int64_t i = lo; i < hi; i++) s += x[i];
      return s;
    });
  };
  float one, two;
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
    CHECK(kernel_threads() == 1);
    one = sum();
  }
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 2);
    two = sum();
  }
  CHECK(one == two);
  CHECK(one == Approx(12.0901).epsilon(1e-4));  // H(100000)
}
