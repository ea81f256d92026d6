// The thread count the kernels split their work for: oneTBB's current cap.
#include "ops/kernels/parallel.hpp"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>

namespace pipeworks {

int kernel_threads() {
  const auto cap = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  return std::max(1, std::min(static_cast<int>(cap), tbb::this_task_arena::max_concurrency()));
}

}  // namespace pipeworks
