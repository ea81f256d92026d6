// Whether n more threads fit this process's address-space limit (ulimit -v), each with a stack of
// RLIMIT_STACK's size: checked before spawning detached actors (a failed thread hangs CAF).
#pragma once
#include <cstddef>

#include "base/result.hpp"

namespace pipeworks {

// An error naming the threads, their stacks and the limit when they cannot fit; ok when there is
// no limit or they fit.
status check_thread_budget(std::size_t threads);

}  // namespace pipeworks
