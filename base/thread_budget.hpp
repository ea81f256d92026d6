// Whether this process can start n more threads under its address-space limit (ulimit -v):
// each reserves a stack of RLIMIT_STACK's size. Checked before spawning many detached actors,
// since a thread that cannot be made leaves CAF waiting for an actor that never runs.
#pragma once
#include <cstddef>

#include "base/result.hpp"

namespace pipeworks {

// An error naming the threads, their stacks and the limit when they cannot fit; ok when there is
// no limit or they fit.
status check_thread_budget(std::size_t threads);

}  // namespace pipeworks
