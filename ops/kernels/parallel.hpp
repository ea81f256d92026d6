// oneTBB helpers for the CPU kernels: a chunked parallel loop that stays serial for small inputs,
// and a sum whose rounding does not depend on the thread count or the scheduling.
#pragma once
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <cstdint>

namespace pipeworks {

// Calls fn(begin, end) on disjoint chunks covering [0, n). Chunks hold at least grain / 2 items,
// so n <= grain runs on the calling thread with no task overhead.
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, const F& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(std::int64_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::int64_t>& r) { fn(r.begin(), r.end()); });
}

// The sum of fn(begin, end) over chunks of [0, n) that depend only on n and grain, added in a
// fixed tree order: the same bits on any number of threads.
template <class T, class F>
T parallel_sum(std::int64_t n, std::int64_t grain, const F& fn) {
  if (n <= 0) return T(0);
  if (n <= grain) return fn(std::int64_t{0}, n);
  return tbb::parallel_deterministic_reduce(
      tbb::blocked_range<std::int64_t>(0, n, grain), T(0),
      [&](const tbb::blocked_range<std::int64_t>& r, T acc) {
        return acc + fn(r.begin(), r.end());
      },
      [](T a, T b) { return a + b; });
}

// The number of threads the kernels may use (oneTBB's cap, set by set_cpu_threads).
int kernel_threads();

}  // namespace pipeworks
