// Splits an elementwise loop over [0, n) across oneTBB workers when n is large enough to pay for
// it; small arrays run inline. Internal to ops/optim.
#pragma once
#include <cstddef>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace pipeworks::optim_detail {

inline constexpr std::size_t parallel_threshold = std::size_t{1} << 15;
inline constexpr std::size_t parallel_grain = std::size_t{1} << 14;

// fn(begin, end) over disjoint chunks covering [0, n).
template <class Fn>
void for_chunks(std::size_t n, Fn&& fn) {
  if (n < parallel_threshold) {
    fn(std::size_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, parallel_grain),
                    [&](const tbb::blocked_range<std::size_t>& r) { fn(r.begin(), r.end()); });
}

}  // namespace pipeworks::optim_detail
